// The traces in samples/traces/ must read the same on any machine, from a clone at any path: every
// module with a frame was looked for by `gpumem symbolize` (so no report opens a local file for
// it), every frame of a sample's own binary has its function and every such stack the line of the
// sample's source (relative to the checkout), and no trace names the checkout it is read from.
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "core/trace.pb.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace gpumem {
namespace {

using testing::ReadFile;
using testing::SourcePath;

namespace fs = std::filesystem;

std::vector<std::string> BundledTraces() {
  std::vector<std::string> traces;
  for (const auto& entry : fs::directory_iterator(SourcePath("samples/traces"))) {
    if (entry.path().extension() == ".trace") traces.push_back(entry.path().string());
  }
  return traces;
}

// The samples' own programs: one folder with an expected.txt each.
std::set<std::string> SampleNames() {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(SourcePath("samples"))) {
    if (fs::exists(entry.path() / "expected.txt")) names.insert(entry.path().filename().string());
  }
  return names;
}

TEST(BundledTraces, AreSymbolizedAndNameEverySampleFrame) {
  const std::set<std::string> samples = SampleNames();
  ASSERT_GT(samples.size(), 5u);
  const std::vector<std::string> traces = BundledTraces();
  ASSERT_GE(traces.size(), 5u);
  size_t sample_frames = 0;
  for (const std::string& path : traces) {
    SCOPED_TRACE(path);
    Trace trace;
    ASSERT_TRUE(trace.ParseFromString(ReadFile(path)));
    absl::flat_hash_map<uint32_t, std::string> module_names;  // id -> basename
    std::vector<const Module*> modules;
    absl::flat_hash_set<uint32_t> looked_for;
    absl::flat_hash_map<uint64_t, const SymbolizedFrame*> symbolized;  // by pc
    for (const TracePacket& packet : trace.packet()) {
      if (packet.has_module()) modules.push_back(&packet.module());
      if (packet.has_symbolization()) {
        looked_for.insert(packet.symbolization().module_id().begin(),
                          packet.symbolization().module_id().end());
      }
      if (packet.has_symbolized_frame()) {
        symbolized[packet.symbolized_frame().pc()] = &packet.symbolized_frame();
      }
    }
    for (const TracePacket& packet : trace.packet()) {
      if (!packet.has_stack()) continue;
      bool in_sample = false;       // the stack passes through a sample's binary
      bool names_its_line = false;  // and one of its frames is a line of the sample's source
      for (uint64_t pc : packet.stack().frame()) {
        const Module* module = nullptr;
        for (const Module* candidate : modules) {
          if (candidate->start() <= pc && pc < candidate->end()) module = candidate;
        }
        if (module == nullptr) continue;
        EXPECT_TRUE(looked_for.contains(module->id())) << module->path();
        const std::string name = fs::path(module->path()).filename().string();
        if (!samples.contains(name)) continue;
        in_sample = true;
        ++sample_frames;
        // Every frame of the binary has its function (the static CUDA runtime's from the symbol
        // table); those with DWARF their file and line.
        auto found = symbolized.find(pc);
        ASSERT_NE(found, symbolized.end()) << name << " pc 0x" << std::hex << pc;
        for (const ResolvedFrame& frame : found->second->frame()) {
          EXPECT_FALSE(frame.function().empty());
          if (frame.file().rfind("samples/" + name + "/", 0) == 0 && frame.line() > 0) {
            names_its_line = true;
          }
        }
      }
      EXPECT_EQ(names_its_line, in_sample) << "stack " << packet.stack().id();
    }
  }
  EXPECT_GT(sample_frames, 10u);
}

// Wherever the project is cloned, no bundled trace or fuzz seed carries the path of the checkout
// that reads it (they were recorded elsewhere, with source paths relative to the checkout).
TEST(BundledTraces, NameNoPathOfThisCheckout) {
  std::vector<std::string> files = BundledTraces();
  for (const auto& entry : fs::directory_iterator(SourcePath("tests/fuzz/corpus"))) {
    files.push_back(entry.path().string());
  }
  const std::string checkout = fs::canonical(SourcePath("")).string();
  ASSERT_GT(checkout.size(), 1u);
  for (const std::string& path : files) {
    EXPECT_EQ(ReadFile(path).find(checkout + "/"), std::string::npos) << path;
  }
}

}  // namespace
}  // namespace gpumem
