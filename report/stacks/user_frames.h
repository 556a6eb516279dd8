// The user's line first: which frame of a stack is the program's own code, and how the allocation
// got from there to the CUDA call (the "via" line). Every place that names a call site in text
// reads it through SiteLabel (report/README.md, "Call sites").
//
// User code. A Python frame is the user's when its file is not a library file
// (IsLibraryPythonFile). A native frame is the user's when its module is outside the system's and
// the frameworks' locations (UserModule): so a program's own binary and its own libraries are,
// the interpreter, libc, CUDA and installed packages are not.
#ifndef GPUMEM_REPORT_STACKS_USER_FRAMES_H_
#define GPUMEM_REPORT_STACKS_USER_FRAMES_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "report/stacks/memory_holders.h"
#include "report/stacks/symbolizer.h"

namespace gpumem::report {

// Whether a native module (its path as recorded) is the program's own: not under /usr/lib*,
// /lib*, /usr/local/cuda*, /opt/nvidia*, a site-packages, dist-packages or lib/python3.x directory,
// a pyenv or conda installation (a path containing "/.pyenv/", "conda", "/miniforge",
// "/mambaforge"), and not by its basename the Python interpreter (python, python3.12), libpython*,
// the C and C++ runtime (libc, libm, libstdc++, libgcc_s, ld-linux...) or CUDA's and gpumem's own
// libraries (libcuda*, libcudart*, libcublas*, libcudnn*, libnccl*, libcupti*, libnvrtc*,
// libnvidia*, libgpumem*), nor a pseudo-module ("[vdso]"). An empty path (no module covers the
// address) is not.
bool IsUserModule(absl::string_view module);
// Whether a frame is the user's own code (Python: its file; native: its module).
bool IsUserFrame(const Frame& frame);
// The innermost frame of the user's code, or nullptr.
const Frame* UserFrame(const std::vector<Frame>& frames);

// A module of the Python interpreter: the python3.x binary or libpython*.
bool IsInterpreterModule(absl::string_view module);

// A C++ name shortened for reading: each template argument list becomes `<…>` and a non-empty
// parameter list `(…)` ("std::vector<int, std::allocator<int> >::push_back(int const&)" ->
// "std::vector<…>::push_back(…)"). `operator<`, `operator()` and friends keep their names.
std::string ShortCppName(absl::string_view name);

// A kernel's demangled name as the text reports print it: without return type, parameters and
// namespaces; without template arguments that are only numbers and built-in types (a kernel's
// tuning: "scal_kernel<float, float, 1, true, 6, 5, 5, 3>" -> "scal_kernel"); and, where its
// template arguments would make it longer than kShortKernelName, with them reduced to the one that
// says what it computes — the last functor or op named in them ("...Functor", "..._functor",
// "...Op"), or the function a lambda argument was written in:
// "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>,
// std::array<char*, 1ul> >(int, ...)" -> "vectorized_elementwise_kernel<FillFunctor>"; else
// `<…>`. A base name as generic as "kernel" keeps its namespace ("gemvx::kernel<…>"). A name
// that is no C++ signature stays as it is, but for one longer than kShortKernelName, as cuBLAS's
// spell out their tiling: its first three words and its last ("sm80_xmma_gemm_…_cublas").
inline constexpr size_t kShortKernelName = 60;
std::string ShortKernelName(absl::string_view name);

// How the user frame prints: "train_mlp.py:75 in make_training.<locals>.train_step" (Python: the
// file as ShortPythonPath gives it), "leak_loop.cc:26 in leak_iteration()" (native: the source
// file's basename, the function shortened), "leak_loop+0x1234 in main" or "leak_loop+0x1234"
// without line information. Escaped for printing.
std::string UserFrameText(const Frame& frame);

// The dotted name of a library Python frame: its package directories (after site-packages or
// dist-packages; at most the first two, those starting with `_` dropped; the module's own name when
// the file is at the top) then its qualname: `torch/nn/modules/linear.py` + `Linear.forward` ->
// `torch.nn.Linear.forward`, `torch/_tensor.py` + `Tensor.backward` -> `torch.Tensor.backward`.
std::string DottedPythonName(const Frame& frame);

// What one call site reads as, below its size line (as the trace has the names: SiteLines escapes
// them for printing).
struct SiteLabel {
  std::optional<Frame> user_frame;  // the innermost frame of the user's code
  std::string first_line;           // UserFrameText, or "(no frame of your code) allocated by ..."
  std::string via;  // "torch.nn.Linear.forward → aten::addmm → cuBLAS workspace"; or empty
};
// The label of a stack (innermost frame first) that `holder` holds (or nullptr). Without a user
// frame, first_line names the holder and library ("(no frame of your code) allocated by NCCL
// (libnccl.so.2)"), or the innermost frame where no library is known ("(no frame of your code) at
// 0x1111").
SiteLabel LabelOf(const std::vector<Frame>& frames, const MemoryHolder* holder);

// The frames `--stacks full` prints: all of them, less the interpreter's own native frames when
// Python frames stand for them; each as Frame::ToString with its C++ names shortened.
std::vector<std::string> FullStackLines(const std::vector<Frame>& frames);

// How call sites print in text (--stacks).
enum class StackStyle {
  kShort,  // the user frame and the via line
  kFull,   // every frame (FullStackLines)
};

// The lines that stand for a call site below its size line, without indentation: under kShort the
// label's first line and "via ..." when it has one; under kFull FullStackLines; "(no stack
// recorded)" for no frames.
std::vector<std::string> SiteLines(const std::vector<Frame>& frames, const SiteLabel& label,
                                   StackStyle style);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_STACKS_USER_FRAMES_H_
