#include "report/symbolizer.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <libelf.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gpumem::report {
namespace {

std::string Basename(std::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::string Demangle(const char* name) {
  if (name == nullptr) return "";
  if (name[0] != '_' || name[1] != 'Z') return name;  // C, or already demangled
  int status = 0;
  char* demangled = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (demangled == nullptr) return name;
  std::string result = demangled;
  std::free(demangled);
  return result;
}

// The GNU build id of the ELF file at `path`; empty if it has none or cannot be read.
std::string ReadBuildId(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
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

bool IsFile(const std::string& path) { return access(path.c_str(), R_OK) == 0; }

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

// Name of the innermost function inlined at `address`, demangled; empty when not inlined or no
// DWARF. Keeps "function (file:line)" consistent: the line table names the inlined code's line.
std::string InlinedFunctionAt(Dwfl_Module* module, Dwarf_Addr address) {
  Dwarf_Addr bias = 0;
  Dwarf_Die* unit = dwfl_module_addrdie(module, address, &bias);
  if (unit == nullptr) return "";
  Dwarf_Die* scopes = nullptr;
  const int count = dwarf_getscopes(unit, address - bias, &scopes);
  std::string name;
  for (int i = 0; i < count; ++i) {
    if (dwarf_tag(&scopes[i]) != DW_TAG_inlined_subroutine) continue;
    Dwarf_Attribute attribute;
    const char* linkage = nullptr;
    if (dwarf_attr_integrate(&scopes[i], DW_AT_linkage_name, &attribute) != nullptr) {
      linkage = dwarf_formstring(&attribute);
    }
    name = linkage != nullptr ? Demangle(linkage) : Demangle(dwarf_diename(&scopes[i]));
    break;
  }
  std::free(scopes);
  return name;
}

}  // namespace

std::string Frame::ToString() const {
  const std::string location =
      module.empty() ? absl::StrCat("0x", absl::Hex(pc))
                     : absl::StrCat(Basename(module), "+0x", absl::Hex(module_offset));
  if (function.empty()) return location;
  if (file.empty()) return absl::StrCat(function, " (", location, ")");
  return absl::StrCat(function, " (", file, ":", line, ")");
}

struct Symbolizer::OpenModule {
  Dwfl* dwfl = nullptr;
  Dwfl_Module* module = nullptr;  // nullptr: no usable file, frames stay module+offset

  ~OpenModule() {
    if (dwfl != nullptr) dwfl_end(dwfl);
  }
};

Symbolizer::Symbolizer(const TraceFile* trace) : trace_(trace) { elf_version(EV_CURRENT); }

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

void Symbolizer::Resolve(OpenModule* module, Frame* frame) {
  if (module == nullptr || module->module == nullptr) return;
  // A return address is the instruction after the call; the call itself is one byte before it,
  // and may sit on another line (or in another function, after a noreturn call).
  const Dwarf_Addr address = frame->pc - 1;
  frame->function = InlinedFunctionAt(module->module, address);
  if (frame->function.empty()) {
    const char* symbol = dwfl_module_addrname(module->module, address);
    // "__libc_start_main@@GLIBC_2.34": the symbol version says nothing about the call site.
    if (symbol != nullptr) {
      frame->function = Demangle(std::string(symbol, std::strcspn(symbol, "@")).c_str());
    }
  }
  if (Dwfl_Line* line = dwfl_module_getsrc(module->module, address)) {
    int line_number = 0;
    const char* file = dwfl_lineinfo(line, nullptr, &line_number, nullptr, nullptr, nullptr);
    if (file != nullptr) {
      frame->file = file;
      frame->line = line_number;
    }
  }
}

Frame Symbolizer::SymbolizeReturnAddress(uint64_t pc, uint64_t packet_index) {
  const ModuleRecord* record = FindModule(pc, packet_index);
  if (record == nullptr) {
    Frame unknown;
    unknown.pc = pc;
    return unknown;
  }
  const std::pair<uint32_t, uint64_t> key{record->module.id(), pc};
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  Frame frame;
  frame.pc = pc;
  frame.module = record->module.path();
  frame.module_offset = pc - record->module.load_bias();
  if (pc != 0) Resolve(Load(*record), &frame);
  cache_.emplace(key, frame);
  return frame;
}

std::vector<Frame> Symbolizer::Symbolize(uint64_t stack_id) {
  std::vector<Frame> frames;
  const StackRecord* record = trace_->FindStack(stack_id);
  if (record == nullptr) return frames;
  frames.reserve(record->stack.frame_size());
  for (uint64_t pc : record->stack.frame()) {
    frames.push_back(SymbolizeReturnAddress(pc, record->written_at));
  }
  return frames;
}

}  // namespace gpumem::report
