// Turns a trace's stack frames (absolute return addresses) into function, file and line, offline,
// with elfutils' libdwfl and the module map recorded in the trace.
//
// Each module is opened on its own (one Dwfl per module) at the load bias it had in the recorded
// process, so modules that reused an address range after a dlclose never collide. A module whose
// file is missing here, or whose GNU build id differs from the recorded one, is looked for by
// basename in the directories of GPUMEM_SYMBOL_PATH (colon-separated) and accepted only with a
// matching build id: no symbols are better than wrong ones. Unresolved frames print as
// `module_basename+0xoffset`, which `addr2line -e module 0xoffset` can resolve elsewhere.
//
// Frames that `gpumem symbolize` recorded in the trace (SymbolizedFrame packets) come first: they
// are used as they are, before any local binary is tried, so a symbolized trace reads the same on
// a machine without the binaries. A module `gpumem symbolize` looked for (its Symbolization
// packet) is never opened here, found there or not: the trace alone says what it resolves to.
#ifndef GPUMEM_REPORT_STACKS_SYMBOLIZER_H_
#define GPUMEM_REPORT_STACKS_SYMBOLIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/string_view.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

// The fields hold names and paths as the trace and the binaries have them (bytes, not escaped).
struct Frame {
  uint64_t pc = 0;       // the recorded return address
  std::string function;  // demangled; empty when unknown
  std::string file;      // source file; empty when there is no line information
  int line = 0;
  std::string module;          // path of the module as recorded; empty when no module covers pc
  uint64_t module_offset = 0;  // pc - load bias: the address in the module's own ELF terms
  bool inlined = false;        // inlined into the next frame, which has the same pc
  // A Python frame (report/stacks/python_stacks.h): `file` is the code object's co_filename, `line`
  // the line it was executing (0: not known), `function` its co_qualname (co_name before 3.11); pc,
  // module and module_offset are 0 and empty.
  bool python = false;
  // Not a frame: where a stack deeper than kMaxStackFrames was cut, how many frames were left out
  // there (0 for every real frame).
  uint64_t left_out = 0;

  // "function (file:line)", "function (libfoo.so+0x1a2b)" or "libfoo.so+0x1a2b"
  // ("0x7f12345678" when no module covers the address). A Python frame: "file:line in function"
  // with the file shortened by ShortPythonPath ("torch/nn/modules/linear.py:125 in
  // Linear.forward"), "file in function" when the line is not known. A cut: "[48977 frames left
  // out]". Escaped for printing (report/format/printable.h): names from the trace and the binaries
  // may hold any bytes.
  std::string ToString() const;
};

// What follows a path's last '/' (the module "libcublas.so.13" of "/usr/lib/libcublas.so.13").
absl::string_view PathBasename(absl::string_view path);

// The most frames Symbolize() gives for one stack: four times the deepest the recorder writes (256
// return addresses, core/options.h), which leaves room for their inlined frames and 128 Python
// frames. A deeper stack (damaged or crafted) keeps its kInnermostFramesKept innermost frames, one
// Frame with left_out set, and its outermost kMaxStackFrames - kInnermostFramesKept - 1: every
// report, export, flame graph and page of it stays that deep, however deep the trace says it is.
inline constexpr size_t kMaxStackFrames = 1024;
inline constexpr size_t kInnermostFramesKept = 768;

class Symbolizer {
 public:
  // `trace` must outlive the symbolizer. It may still be reading: a stack is resolved against the
  // modules loaded before its Stack packet, which are always known by then.
  explicit Symbolizer(const TraceFile* trace);
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Innermost frame first. A return address inside inlined code gives one frame per inlined
  // function, then the function they were inlined into (as `addr2line -i` does), so there may be
  // more frames than the stack has addresses. An unknown stack id gives no frames. A stack with
  // Python frames has them spliced in (report/stacks/python_stacks.h): each native frame of the
  // interpreter's eval loop is replaced by the Python frames it ran. At most kMaxStackFrames.
  std::vector<Frame> Symbolize(uint64_t stack_id);
  // The native frames alone, as Symbolize() gives them for a stack without Python frames (at most
  // kMaxStackFrames too).
  std::vector<Frame> SymbolizeNative(uint64_t stack_id);

  // The frames of one return address, as of the packet with index `packet_index` (which modules
  // were loaded then). Valid until the symbolizer is destroyed.
  const std::vector<Frame>& SymbolizeReturnAddress(uint64_t pc, uint64_t packet_index);

  // The same, from the binaries on this machine only (what `gpumem symbolize` records); not
  // cached. `record` is the module covering pc (FindModule), or nullptr. Without `open_binary`,
  // the unresolved frame (module+offset).
  std::vector<Frame> SymbolizeFromBinaries(uint64_t pc, const ModuleRecord* record,
                                           bool open_binary = true);

  // The module record covering pc at packet_index, or nullptr.
  const ModuleRecord* FindModule(uint64_t pc, uint64_t packet_index) const;

 private:
  struct OpenModule;

  // The frames recorded in the trace for (module, pc), or nullptr. While the trace has not been
  // read yet (`gpumem dump` symbolizes as it reads), its SymbolizedFrame packets, which come
  // last, are looked up in a pass of their own over the file.
  const SymbolizedFrame* Recorded(uint32_t module_id, uint64_t pc);
  // Whether a Symbolization packet names the module (`gpumem symbolize` looked for its binary).
  bool SymbolizedInTrace(uint32_t module_id);
  // The opened module for `record` (opening it the first time); nullptr if its file is unusable.
  OpenModule* Load(const ModuleRecord& record);
  // `unresolved` (pc and module set) with function, file and line, inlined frames first.
  std::vector<Frame> Resolve(OpenModule* module, const Frame& unresolved);

  const TraceFile* trace_;
  absl::flat_hash_map<uint32_t, std::unique_ptr<OpenModule>> modules_;  // by module id
  // (module id, pc) -> frames: the same return addresses recur in nearly every stack. A node map,
  // so references returned by SymbolizeReturnAddress stay valid.
  absl::node_hash_map<std::pair<uint32_t, uint64_t>, std::vector<Frame>> cache_;
  // SymbolizedFrame packets found by Recorded()'s own pass over a trace not read yet.
  bool scanned_ = false;
  absl::flat_hash_map<std::pair<uint32_t, uint64_t>, SymbolizedFrame> scanned_frames_;
  absl::flat_hash_set<uint32_t> scanned_modules_;
};

// Makes `trace`'s backward passes (report/trace/backward_credit.h) credit, besides threads named
// pt_autograd, a thread whose native stack has a frame in torch::autograd::Engine, as
// `symbolizer` resolves it. Both must outlive the trace's reading.
void CreditAutogradEngineStacks(Symbolizer* symbolizer, TraceFile* trace);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_STACKS_SYMBOLIZER_H_
