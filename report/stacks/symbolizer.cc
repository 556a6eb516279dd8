#include "report/stacks/symbolizer.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <span>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/trace_reader.h"
#include "report/format/names.h"
#include "report/format/printable.h"
#include "report/stacks/python_stacks.h"

namespace gpumem::report {

absl::string_view PathBasename(absl::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

namespace {

std::string Basename(absl::string_view path) { return std::string(PathBasename(path)); }

// The GNU build id of the ELF file at `path`; empty if it has none, cannot be read or is not a
// regular file (O_NONBLOCK: a FIFO named in a trace must not block the open).
std::string ReadBuildId(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return "";
  struct stat info;
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    close(fd);
    return "";
  }
  std::string id;
  if (Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr)) {
    const void* bytes = nullptr;
    const ssize_t length = dwelf_elf_gnu_build_id(elf, &bytes);
    if (length > 0) id.assign(static_cast<const char*>(bytes), static_cast<size_t>(length));
    elf_end(elf);
  }
  close(fd);
  return id;
}

// A readable regular file: a module path in a trace may name anything on this machine, and libdwfl
// opens it blocking (a FIFO would hang every command) and reads it whole (a device).
bool IsFile(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && access(path.c_str(), R_OK) == 0;
}

// A binary built with its source paths relative (-ffile-prefix-map, as gpumem's samples are) has
// "." as its compilation directory, which libdw puts in front: "./samples/x.cc" reads as
// "samples/x.cc".
std::string SourcePath(std::string file) {
  while (file.size() > 2 && file[0] == '.' && file[1] == '/') file.erase(0, 2);
  return file;
}

// Where to read `module` from on this machine: its recorded path if that is the same file (same
// build id, or none recorded), else a same-named file with the recorded build id in
// GPUMEM_SYMBOL_PATH. Empty when neither exists.
std::string FindModuleFile(const Module& module) {
  const std::string& want = module.build_id();
  if (!module.path().empty() && IsFile(module.path()) &&
      (want.empty() || ReadBuildId(module.path()) == want)) {
    return module.path();
  }
  const char* search = std::getenv("GPUMEM_SYMBOL_PATH");
  if (search == nullptr || want.empty()) return "";
  const std::string name = Basename(module.path());
  for (absl::string_view dir : absl::StrSplit(search, ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/", name);
    if (IsFile(candidate) && ReadBuildId(candidate) == want) return candidate;
  }
  return "";
}

// Standard offline callbacks: the ELF is given by path; separate debug info is found through
// .gnu_debuglink and /usr/lib/debug/.build-id as gdb does.
char* debuginfo_path = nullptr;
const Dwfl_Callbacks kOfflineCallbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &debuginfo_path,
};

// A function's name from its DIE (subprogram or inlined subroutine): the demangled linkage name,
// which has the namespace, class and parameters, else the plain name (C functions, main).
std::string FunctionName(Dwarf_Die* function) {
  Dwarf_Attribute attribute;
  const char* linkage = nullptr;
  if (dwarf_attr_integrate(function, DW_AT_linkage_name, &attribute) != nullptr ||
      dwarf_attr_integrate(function, DW_AT_MIPS_linkage_name, &attribute) != nullptr) {
    linkage = dwarf_formstring(&attribute);
  }
  return Demangle(linkage != nullptr ? linkage : dwarf_diename(function));
}

// Entry `index` of the compilation unit's file table (DW_AT_call_file refers to it).
std::string UnitSourceFile(Dwarf_Die* unit, Dwarf_Word index) {
  Dwarf_Files* files = nullptr;
  size_t count = 0;
  if (dwarf_getsrcfiles(unit, &files, &count) != 0 || index >= count) return "";
  const char* name = dwarf_filesrc(files, index, nullptr, nullptr);
  return name != nullptr ? name : "";
}

struct SourceFrame {
  std::string function;
  std::string file;
  int line = 0;
};

// The functions active at `address`, innermost first: the inlined ones, then the real function
// they were inlined into. The innermost is at (file, line) of the line table; each outer one at
// the call site of the function inlined into it. Empty where there is no DWARF for `address`.
std::vector<SourceFrame> InlineChain(Dwfl_Module* module, Dwarf_Addr address, std::string file,
                                     int line) {
  std::vector<SourceFrame> chain;
  Dwarf_Addr bias = 0;
  Dwarf_Die* unit = dwfl_module_addrdie(module, address, &bias);
  if (unit == nullptr) return chain;
  // dwarf_getscopes() finds the innermost scope at the address, but above an inlined function
  // it continues with the scopes of that function's own definition; the DIE nesting of the
  // innermost scope is what leads to the caller it was inlined into (as eu-addr2line -i does).
  Dwarf_Die* scopes = nullptr;
  if (dwarf_getscopes(unit, address - bias, &scopes) <= 0) {
    std::free(scopes);
    return chain;
  }
  Dwarf_Die innermost = scopes[0];
  std::free(scopes);
  scopes = nullptr;
  const int count = dwarf_getscopes_die(&innermost, &scopes);
  for (int i = 0; i < count; ++i) {
    const int tag = dwarf_tag(&scopes[i]);
    if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram) continue;
    chain.push_back(SourceFrame{FunctionName(&scopes[i]), file, line});
    if (tag == DW_TAG_subprogram) break;
    Dwarf_Attribute attribute;
    Dwarf_Word value = 0;
    file = dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_file, &attribute), &value) == 0
               ? UnitSourceFile(unit, value)
               : "";
    line = dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_line, &attribute), &value) == 0
               ? static_cast<int>(value)
               : 0;
  }
  std::free(scopes);
  return chain;
}

// Frame::ToString() before escaping: names and paths as the trace and the binaries have them.
std::string UnescapedText(const Frame& frame) {
  if (frame.left_out > 0) return absl::StrCat("[", frame.left_out, " frames left out]");
  if (frame.python) {
    const std::string where = frame.line > 0
                                  ? absl::StrCat(ShortPythonPath(frame.file), ":", frame.line)
                                  : ShortPythonPath(frame.file);
    return absl::StrCat(where, " in ", frame.function.empty() ? "?" : frame.function);
  }
  const std::string location = frame.module.empty() ? absl::StrCat("0x", absl::Hex(frame.pc))
                                                    : absl::StrCat(Basename(frame.module), "+0x",
                                                                   absl::Hex(frame.module_offset));
  if (frame.function.empty()) return location;
  if (frame.file.empty()) return absl::StrCat(frame.function, " (", location, ")");
  return absl::StrCat(frame.function, " (", frame.file, ":", frame.line, ")");
}

}  // namespace

std::string Frame::ToString() const { return Printable(UnescapedText(*this)); }

struct Symbolizer::OpenModule {
  Dwfl* dwfl = nullptr;
  Dwfl_Module* module = nullptr;  // nullptr: no usable file, frames stay module+offset

  ~OpenModule() {
    if (dwfl != nullptr) dwfl_end(dwfl);
  }
};

Symbolizer::Symbolizer(const TraceFile* trace) : trace_(trace) {
  // libelf's version is global: set once, not by each of the traces analysed at once.
  static std::once_flag elf_version_set;
  std::call_once(elf_version_set, [] { elf_version(EV_CURRENT); });
}

Symbolizer::~Symbolizer() = default;

const ModuleRecord* Symbolizer::FindModule(uint64_t pc, uint64_t packet_index) const {
  const std::vector<ModuleRecord>& modules = trace_->modules();
  // Newest first: after a dlclose, a later module may cover the same addresses.
  for (auto it = modules.rbegin(); it != modules.rend(); ++it) {
    if (it->module.start() <= pc && pc < it->module.end() && it->LoadedAt(packet_index)) {
      return &*it;
    }
  }
  return nullptr;
}

Symbolizer::OpenModule* Symbolizer::Load(const ModuleRecord& record) {
  std::unique_ptr<OpenModule>& open = modules_[record.module.id()];
  if (open != nullptr) return open.get();
  open = std::make_unique<OpenModule>();
  const std::string file = FindModuleFile(record.module);
  if (file.empty()) return open.get();
  open->dwfl = dwfl_begin(&kOfflineCallbacks);
  if (open->dwfl == nullptr) return open.get();
  dwfl_report_begin(open->dwfl);
  // add_p_vaddr: the module's bias is then exactly the recorded load bias (runtime address =
  // ELF address + bias), whatever the first segment's address.
  open->module = dwfl_report_elf(open->dwfl, Basename(record.module.path()).c_str(), file.c_str(),
                                 -1, record.module.load_bias(), /*add_p_vaddr=*/true);
  dwfl_report_end(open->dwfl, nullptr, nullptr);
  return open.get();
}

std::vector<Frame> Symbolizer::Resolve(OpenModule* module, const Frame& unresolved) {
  if (module == nullptr || module->module == nullptr || unresolved.pc == 0) return {unresolved};
  // A return address is the instruction after the call; the call itself is one byte before it,
  // and may sit on another line (or in another function, after a noreturn call).
  const Dwarf_Addr address = unresolved.pc - 1;
  Frame frame = unresolved;
  if (Dwfl_Line* line = dwfl_module_getsrc(module->module, address)) {
    const char* file = dwfl_lineinfo(line, nullptr, &frame.line, nullptr, nullptr, nullptr);
    if (file != nullptr) frame.file = SourcePath(file);
  }
  // The symbol table names the function that holds the code, also without DWARF.
  if (const char* symbol = dwfl_module_addrname(module->module, address)) {
    // "__libc_start_main@@GLIBC_2.34": the symbol version says nothing about the call site.
    frame.function = Demangle(std::string(symbol, std::strcspn(symbol, "@")).c_str());
  }
  std::vector<SourceFrame> chain = InlineChain(module->module, address, frame.file, frame.line);
  if (chain.empty()) return {frame};
  std::vector<Frame> frames;
  for (size_t i = 0; i < chain.size(); ++i) {
    Frame level = frame;
    if (!chain[i].function.empty()) level.function = std::move(chain[i].function);
    level.file = SourcePath(std::move(chain[i].file));
    level.line = chain[i].line;
    level.inlined = i + 1 < chain.size();
    frames.push_back(std::move(level));
  }
  return frames;
}

const SymbolizedFrame* Symbolizer::Recorded(uint32_t module_id, uint64_t pc) {
  if (const SymbolizedFrame* found = trace_->FindSymbolizedFrame(module_id, pc)) return found;
  if (trace_->packets_read()) return nullptr;
  if (!scanned_) {
    scanned_ = true;
    TraceReader reader;
    std::string error;
    if (reader.Open(trace_->path(), &error)) {
      // Only packets whose first byte is the tag of TracePacket.symbolized_frame (field 9) or
      // .symbolization (field 19, a two-byte tag) are parsed.
      constexpr char kFrameTag = static_cast<char>((9 << 3) | 2);
      constexpr char kSymbolizationTag = static_cast<char>(0x80 | (((19 << 3) | 2) & 0x7f));
      Packet packet;
      while (reader.Next(&packet)) {
        if (packet.bytes.empty() ||
            (packet.bytes[0] != kFrameTag && packet.bytes[0] != kSymbolizationTag)) {
          continue;
        }
        TracePacket parsed;
        if (!parsed.ParseFromArray(packet.bytes.data(), static_cast<int>(packet.bytes.size()))) {
          continue;
        }
        if (parsed.has_symbolized_frame()) {
          const SymbolizedFrame& frame = parsed.symbolized_frame();
          scanned_frames_[{frame.module_id(), frame.pc()}] = frame;
        } else if (parsed.has_symbolization()) {
          const auto& ids = parsed.symbolization().module_id();
          scanned_modules_.insert(ids.begin(), ids.end());
        }
      }
    }
  }
  auto it = scanned_frames_.find({module_id, pc});
  return it == scanned_frames_.end() ? nullptr : &it->second;
}

bool Symbolizer::SymbolizedInTrace(uint32_t module_id) {
  if (trace_->ModuleSymbolized(module_id)) return true;
  if (trace_->packets_read()) return false;
  Recorded(module_id, 0);  // scans the file for its symbolize packets, once
  return scanned_modules_.contains(module_id);
}

std::vector<Frame> Symbolizer::SymbolizeFromBinaries(uint64_t pc, const ModuleRecord* record,
                                                     bool open_binary) {
  Frame frame;
  frame.pc = pc;
  if (record == nullptr) return {frame};
  frame.module = record->module.path();
  frame.module_offset = pc - record->module.load_bias();
  if (!open_binary) return {frame};
  return Resolve(Load(*record), frame);
}

const std::vector<Frame>& Symbolizer::SymbolizeReturnAddress(uint64_t pc, uint64_t packet_index) {
  const ModuleRecord* record = FindModule(pc, packet_index);
  constexpr uint32_t kNoModule = std::numeric_limits<uint32_t>::max();
  const std::pair<uint32_t, uint64_t> key{record != nullptr ? record->module.id() : kNoModule, pc};
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  if (record != nullptr) {
    if (const SymbolizedFrame* recorded = Recorded(record->module.id(), pc);
        recorded != nullptr && recorded->frame_size() > 0) {
      std::vector<Frame> frames;
      for (const ResolvedFrame& resolved : recorded->frame()) {
        Frame frame;
        frame.pc = pc;
        frame.function = resolved.function();
        frame.file = resolved.file();
        frame.line = static_cast<int>(resolved.line());
        frame.module = record->module.path();
        frame.module_offset = pc - record->module.load_bias();
        frame.inlined = resolved.inlined();
        frames.push_back(std::move(frame));
      }
      return cache_.emplace(key, std::move(frames)).first->second;
    }
    if (SymbolizedInTrace(record->module.id())) {  // no binary had it there: none is read here
      return cache_.emplace(key, SymbolizeFromBinaries(pc, record, /*open_binary=*/false))
          .first->second;
    }
  }
  return cache_.emplace(key, SymbolizeFromBinaries(pc, record)).first->second;
}

namespace {

// The concatenation of `runs`, cut as kMaxStackFrames says: the frames kept are copied, the others
// only counted.
std::vector<Frame> JoinRuns(const std::vector<std::span<const Frame>>& runs) {
  uint64_t total = 0;
  for (const std::span<const Frame>& run : runs) total += run.size();
  const uint64_t left_out = total > kMaxStackFrames ? total - kMaxStackFrames + 1 : 0;
  // Frames at positions [kInnermostFramesKept, outer_start) are left out.
  const uint64_t outer_start = kInnermostFramesKept + left_out;
  std::vector<Frame> frames;
  frames.reserve(static_cast<size_t>(std::min<uint64_t>(total, kMaxStackFrames)));
  uint64_t position = 0;
  for (const std::span<const Frame>& run : runs) {
    for (size_t i = 0; i < run.size(); ++i, ++position) {
      if (position < kInnermostFramesKept || position >= outer_start) {
        frames.push_back(run[i]);
      } else if (position == kInnermostFramesKept) {
        frames.emplace_back().left_out = left_out;
      } else {  // the rest of the run is left out too, or up to the outermost frames
        const uint64_t skip = std::min<uint64_t>(run.size() - i, outer_start - position) - 1;
        i += skip;
        position += skip;
      }
    }
  }
  return frames;
}

}  // namespace

std::vector<Frame> Symbolizer::SymbolizeNative(uint64_t stack_id) {
  const StackRecord* record = trace_->FindStack(stack_id);
  if (record == nullptr) return {};
  std::vector<std::span<const Frame>> runs;
  runs.reserve(record->stack.frame_size());
  for (uint64_t pc : record->stack.frame()) {
    runs.emplace_back(SymbolizeReturnAddress(pc, record->written_at));
  }
  return JoinRuns(runs);
}

std::vector<Frame> Symbolizer::Symbolize(uint64_t stack_id) {
  const StackRecord* record = trace_->FindStack(stack_id);
  if (record == nullptr) return {};
  const Stack& stack = record->stack;
  if (stack.python_code_size() == 0) return SymbolizeNative(stack_id);
  std::vector<Frame> python;
  std::vector<uint32_t> groups;
  for (int i = 0; i < stack.python_code_size(); ++i) {
    Frame frame;
    frame.python = true;
    if (const PythonCode* code = trace_->FindPythonCode(stack.python_code(i))) {
      frame.file = code->filename();
      frame.function = code->function();
    } else {
      frame.file = absl::StrCat("<python code ", stack.python_code(i), ">");
    }
    frame.line = i < stack.python_line_size() ? static_cast<int>(stack.python_line(i)) : 0;
    python.push_back(std::move(frame));
    groups.push_back(i < stack.python_group_size() ? stack.python_group(i) : 0);
  }
  std::vector<const std::vector<Frame>*> native;
  native.reserve(stack.frame_size());
  for (uint64_t pc : stack.frame()) {
    native.push_back(&SymbolizeReturnAddress(pc, record->written_at));
  }
  return JoinRuns(SpliceStack(native, python, groups));
}

void CreditAutogradEngineStacks(Symbolizer* symbolizer, TraceFile* trace) {
  trace->set_autograd_stack_test([symbolizer](uint64_t stack_id) {
    for (const Frame& frame : symbolizer->SymbolizeNative(stack_id)) {
      if (absl::StrContains(frame.function, "torch::autograd::Engine")) return true;
    }
    return false;
  });
}

}  // namespace gpumem::report
