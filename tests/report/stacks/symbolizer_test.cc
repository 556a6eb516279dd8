// The symbolizer on a real module, this test binary: a trace whose module map holds it at the load
// bias it has now, and stacks with addresses of functions defined here.
#include "report/stacks/symbolizer.h"

#include <elf.h>
#include <link.h>
#include <stdlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/trace.pb.h"
#include "gtest/gtest.h"
#include "report/trace/trace_file.h"
#include "tests/support/test_support.h"

namespace gpumem_symbolizer_test {

// noinline and used through a pointer, so the function keeps a body and a symbol of its own.
__attribute__((noinline)) int KnownFunction(int x) {
  asm volatile("" ::: "memory");
  return x * 3 + 1;
}

__attribute__((noinline)) uint64_t ReturnAddressOfCall() {
  uint64_t address = reinterpret_cast<uint64_t>(__builtin_return_address(0));
  asm volatile("" ::: "memory");
  return address;
}

// Calls ReturnAddressOfCall on the line kCallLine: the return address resolves to this function
// and that line.
constexpr int kCallLine = __LINE__ + 2;
__attribute__((noinline)) uint64_t CallerOfKnownLine() {
  uint64_t pc = ReturnAddressOfCall();
  asm volatile("" ::: "memory");
  return pc;
}

// Inlined into its caller: a return address inside it belongs to two functions at once.
constexpr int kInlinedCallLine = __LINE__ + 2;
__attribute__((always_inline)) inline uint64_t InlinedHelper() {
  uint64_t pc = ReturnAddressOfCall();
  asm volatile("" ::: "memory");
  return pc;
}

constexpr int kHelperCallLine = __LINE__ + 2;
__attribute__((noinline)) uint64_t CallerOfInlinedHelper() {
  uint64_t pc = InlinedHelper();
  asm volatile("" ::: "memory");
  return pc;
}

}  // namespace gpumem_symbolizer_test

namespace gpumem::report {
namespace {

using testing::Framed;
using testing::UniqueTempPath;

// This executable as the recorder would describe it.
Module SelfModule() {
  Module module;
  module.set_id(1);
  module.set_path(std::filesystem::read_symlink("/proc/self/exe").string());
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* module = static_cast<Module*>(data);
        module->set_load_bias(info->dlpi_addr);
        uint64_t start = UINT64_MAX, end = 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& segment = info->dlpi_phdr[i];
          if (segment.p_type == PT_LOAD) {
            start = std::min<uint64_t>(start, info->dlpi_addr + segment.p_vaddr);
            end = std::max<uint64_t>(end, info->dlpi_addr + segment.p_vaddr + segment.p_memsz);
          }
          if (segment.p_type != PT_NOTE) continue;
          // Notes: header, name padded to 4, description padded to 4.
          const char* note = reinterpret_cast<const char*>(info->dlpi_addr + segment.p_vaddr);
          const char* notes_end = note + segment.p_memsz;
          while (note + sizeof(ElfW(Nhdr)) <= notes_end) {
            const auto* header = reinterpret_cast<const ElfW(Nhdr)*>(note);
            const char* name = note + sizeof(ElfW(Nhdr));
            const char* description = name + ((header->n_namesz + 3) & ~3u);
            if (header->n_type == NT_GNU_BUILD_ID && header->n_namesz == 4 &&
                std::memcmp(name, "GNU", 4) == 0) {
              module->set_build_id(std::string(description, header->n_descsz));
            }
            note = description + ((header->n_descsz + 3) & ~3u);
          }
        }
        module->set_start(start);
        module->set_end(end);
        return 1;  // the first object is the executable itself
      },
      &module);
  return module;
}

class SymbolizerTest : public ::testing::Test {
 protected:
  void TearDown() override {
    std::remove(path_.c_str());
    unsetenv("GPUMEM_SYMBOL_PATH");
  }

  // A trace with `module` and one stack (id 1) holding `frames`.
  std::unique_ptr<TraceFile> WriteTrace(const Module& module, const std::vector<uint64_t>& frames) {
    TracePacket header;
    header.mutable_header()->set_format_version(1);
    TracePacket module_packet;
    *module_packet.mutable_module() = module;
    TracePacket stack;
    stack.mutable_stack()->set_id(1);
    for (uint64_t frame : frames) stack.mutable_stack()->add_frame(frame);
    std::ofstream(path_, std::ios::binary)
        << Framed(header) << Framed(module_packet) << Framed(stack);
    absl::StatusOr<std::unique_ptr<TraceFile>> trace = TraceFile::Read(path_);
    EXPECT_TRUE(trace.ok()) << trace.status();
    return trace.ok() ? *std::move(trace) : nullptr;
  }

  std::string path_ = UniqueTempPath(".trace");
};

TEST_F(SymbolizerTest, ResolvesAFunctionOfThisBinaryDemangled) {
  const Module module = SelfModule();
  ASSERT_FALSE(module.build_id().empty()) << "linked without --build-id?";
  const uint64_t function = reinterpret_cast<uint64_t>(&gpumem_symbolizer_test::KnownFunction);
  ASSERT_GE(function, module.start());
  ASSERT_LT(function, module.end());
  std::unique_ptr<TraceFile> trace = WriteTrace(module, {function + 1, 0x10});
  ASSERT_NE(trace, nullptr);

  Symbolizer symbolizer(trace.get());
  const std::vector<Frame> frames = symbolizer.Symbolize(1);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].pc, function + 1);
  EXPECT_EQ(frames[0].function, "gpumem_symbolizer_test::KnownFunction(int)");
  EXPECT_EQ(frames[0].module, module.path());
  EXPECT_EQ(frames[0].module_offset, function + 1 - module.load_bias());
  // No module covers the second frame.
  EXPECT_EQ(frames[1].function, "");
  EXPECT_EQ(frames[1].ToString(), "0x10");
  EXPECT_TRUE(symbolizer.Symbolize(2).empty());
}

TEST_F(SymbolizerTest, AReturnAddressResolvesToTheCallLine) {
  const uint64_t pc = gpumem_symbolizer_test::CallerOfKnownLine();
  std::unique_ptr<TraceFile> trace = WriteTrace(SelfModule(), {pc});
  ASSERT_NE(trace, nullptr);
  Symbolizer symbolizer(trace.get());
  const Frame frame = symbolizer.Symbolize(1).at(0);
  EXPECT_EQ(frame.function, "gpumem_symbolizer_test::CallerOfKnownLine()");
  if (frame.file.empty()) GTEST_SKIP() << "test binary built without line information";
  EXPECT_TRUE(frame.file.ends_with("symbolizer_test.cc")) << frame.file;
  EXPECT_EQ(frame.line, gpumem_symbolizer_test::kCallLine);
  EXPECT_EQ(frame.ToString(), frame.function + " (" + frame.file + ":" +
                                  std::to_string(gpumem_symbolizer_test::kCallLine) + ")");
}

TEST_F(SymbolizerTest, InlinedCodeGivesAFrameForEachFunction) {
  const uint64_t pc = gpumem_symbolizer_test::CallerOfInlinedHelper();
  std::unique_ptr<TraceFile> trace = WriteTrace(SelfModule(), {pc});
  ASSERT_NE(trace, nullptr);
  Symbolizer symbolizer(trace.get());
  const std::vector<Frame> frames = symbolizer.Symbolize(1);
  if (frames.at(0).file.empty()) GTEST_SKIP() << "test binary built without line information";
  std::string shown;
  for (const Frame& frame : frames) shown += frame.ToString() + "\n";
  ASSERT_EQ(frames.size(), 2u) << shown;
  EXPECT_EQ(frames[0].function, "gpumem_symbolizer_test::InlinedHelper()");
  EXPECT_EQ(frames[0].line, gpumem_symbolizer_test::kInlinedCallLine);
  EXPECT_TRUE(frames[0].inlined);
  EXPECT_EQ(frames[1].function, "gpumem_symbolizer_test::CallerOfInlinedHelper()");
  EXPECT_EQ(frames[1].line, gpumem_symbolizer_test::kHelperCallLine);
  EXPECT_TRUE(frames[1].file.ends_with("symbolizer_test.cc")) << frames[1].file;
  EXPECT_FALSE(frames[1].inlined);
  EXPECT_EQ(frames[0].pc, pc);
  EXPECT_EQ(frames[1].pc, pc);
}

TEST_F(SymbolizerTest, MissingModuleIsFoundInGpumemSymbolPathByBuildId) {
  Module module = SelfModule();
  const std::filesystem::path real(module.path());
  module.set_path("/nonexistent/elsewhere/" + real.filename().string());
  const uint64_t function = reinterpret_cast<uint64_t>(&gpumem_symbolizer_test::KnownFunction);
  const std::string fallback =
      real.filename().string() + "+0x" + absl::StrCat(absl::Hex(function + 1 - module.load_bias()));

  {  // Not on GPUMEM_SYMBOL_PATH: printed as module+offset.
    std::unique_ptr<TraceFile> trace = WriteTrace(module, {function + 1});
    Symbolizer symbolizer(trace.get());
    EXPECT_EQ(symbolizer.Symbolize(1).at(0).ToString(), fallback);
  }
  setenv("GPUMEM_SYMBOL_PATH", ("/nonexistent:" + real.parent_path().string()).c_str(), 1);
  {
    std::unique_ptr<TraceFile> trace = WriteTrace(module, {function + 1});
    Symbolizer symbolizer(trace.get());
    EXPECT_EQ(symbolizer.Symbolize(1).at(0).function, "gpumem_symbolizer_test::KnownFunction(int)");
  }
  {  // Same name, other build id: another binary, so its symbols would be wrong.
    module.set_build_id(std::string(20, '\x42'));
    std::unique_ptr<TraceFile> trace = WriteTrace(module, {function + 1});
    Symbolizer symbolizer(trace.get());
    EXPECT_EQ(symbolizer.Symbolize(1).at(0).ToString(), fallback);
  }
}

TEST_F(SymbolizerTest, ALocalFileWithAnotherBuildIdIsNotUsed) {
  Module module = SelfModule();
  module.set_build_id(std::string(20, '\x42'));
  const uint64_t function = reinterpret_cast<uint64_t>(&gpumem_symbolizer_test::KnownFunction);
  std::unique_ptr<TraceFile> trace = WriteTrace(module, {function + 1});
  Symbolizer symbolizer(trace.get());
  EXPECT_EQ(symbolizer.Symbolize(1).at(0).function, "");
}

TEST_F(SymbolizerTest, GpumemDumpSymbolizePrintsFunctionNames) {
  const uint64_t function = reinterpret_cast<uint64_t>(&gpumem_symbolizer_test::KnownFunction);
  ASSERT_NE(WriteTrace(SelfModule(), {function + 1}), nullptr);
  const std::string command =
      std::string(GPUMEM_BUILD_DIR "/bin/gpumem dump --symbolize ") + path_ + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) output.append(buffer, n);
  EXPECT_EQ(pclose(pipe), 0) << output;
  EXPECT_NE(output.find("#2 stack id=1 frames=[gpumem_symbolizer_test::KnownFunction(int)"),
            std::string::npos)
      << output;
}

// Stacks up to kMaxStackFrames give every frame; deeper ones their 768 innermost, a frame that
// says how many were left out, and their 255 outermost (unknown addresses: no module covers 1..).
TEST_F(SymbolizerTest, StacksDeeperThanTheLimitAreCut) {
  Module nowhere;
  nowhere.set_id(1);
  nowhere.set_path("/nonexistent/libnothing.so");
  nowhere.set_start(0x7f0000000000);
  nowhere.set_end(0x7f0000001000);
  for (const size_t depth : {kMaxStackFrames, kMaxStackFrames + 1, size_t{50000}}) {
    SCOPED_TRACE(depth);
    std::vector<uint64_t> pcs;
    for (size_t i = 0; i < depth; ++i) pcs.push_back(i + 1);  // innermost first
    std::unique_ptr<TraceFile> trace = WriteTrace(nowhere, pcs);
    ASSERT_NE(trace, nullptr);
    Symbolizer symbolizer(trace.get());
    const std::vector<Frame> frames = symbolizer.Symbolize(1);
    ASSERT_EQ(frames.size(), kMaxStackFrames);
    EXPECT_EQ(frames.front().pc, 1u);
    EXPECT_EQ(frames.back().pc, depth);
    if (depth == kMaxStackFrames) {
      EXPECT_EQ(frames[kInnermostFramesKept].pc, kInnermostFramesKept + 1);
      continue;
    }
    const Frame& cut = frames[kInnermostFramesKept];
    EXPECT_EQ(cut.left_out, depth - kMaxStackFrames + 1);
    EXPECT_EQ(cut.ToString(),
              "[" + std::to_string(depth - kMaxStackFrames + 1) + " frames left out]");
    EXPECT_EQ(frames[kInnermostFramesKept - 1].pc, kInnermostFramesKept);
    EXPECT_EQ(frames[kInnermostFramesKept + 1].pc,
              depth - (kMaxStackFrames - kInnermostFramesKept - 2));
    EXPECT_EQ(symbolizer.SymbolizeNative(1).size(), kMaxStackFrames);
  }
}

}  // namespace
}  // namespace gpumem::report
