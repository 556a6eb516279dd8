// Python frames in stacks: splicing a trace's Python frames (Stack.python_code/line/group) into its
// symbolized native frames, and the call-site rules that read them (--group-by, --python-only).
// See report/README.md ("Python frames").
//
// Splicing. The native frames are read innermost first; the return addresses that symbolize to the
// interpreter's eval loop (IsEvalFrameFunction) are counted from the innermost, 0, 1, ..., and the
// k-th is replaced by the Python frames of group k (in their order, innermost first). Groups with
// no such native frame (the native stack was cut at its depth limit, or the interpreter has no
// symbols) follow the last native frame, in order; an eval frame without a group stays as it is.
// A stack without Python frames is exactly its native frames.
#ifndef GPUMEM_REPORT_STACKS_PYTHON_STACKS_H_
#define GPUMEM_REPORT_STACKS_PYTHON_STACKS_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "report/stacks/symbolizer.h"

namespace gpumem::report {

// Whether a native function is the interpreter's eval loop, whose activations the recorder numbers
// Python frame groups by: `_PyEval_EvalFrameDefault`, also as the compiler's split-off parts of it
// (`_PyEval_EvalFrameDefault.cold`, `.part.0`, `.lto_priv.0`, `.isra.0`, `.constprop.0`: the same
// activation). Only that function: the recorder counts its frames, so counting its callers too
// (`_PyEval_EvalFrame`, `_PyEval_Vector`, `PyEval_EvalCode`, which each call it once) would
// misplace every group above them; they stay native frames.
bool IsEvalFrameFunction(absl::string_view function);

// One stack's frames with its Python frames spliced in, as runs of consecutive frames (spans into
// `native`'s vectors and `python`): the stack is their concatenation, which the caller makes (the
// Symbolizer, bounded: report/stacks/symbolizer.h). `native[i]` is the symbolization of the i-th
// return address (inlined frames first, as Symbolizer gives them); `python` the Python frames
// innermost first and `groups` their group numbers (same length). Iterative, and as long as its
// inputs.
std::vector<std::span<const Frame>> SpliceStack(
    const std::vector<const std::vector<Frame>*>& native, const std::vector<Frame>& python,
    const std::vector<uint32_t>& groups);

bool HasPythonFrames(const std::vector<Frame>& frames);

// --python-only: the Python frames alone, when there are any; otherwise all the frames.
std::vector<Frame> PythonOnly(const std::vector<Frame>& frames);

// Whether a path lies in an installed package or a Python's own library: it contains
// `/site-packages/`, `/dist-packages/`, `/lib/python3.` or `/lib64/python3.`.
bool InPythonInstallation(absl::string_view path);

// Whether a Python source file belongs to the standard library or an installed package rather
// than the user's own code: a path containing `/site-packages/`, `/dist-packages/`,
// `/lib/python3.` or `/lib64/python3.`, a pseudo-file `<frozen ...>`, `<string>`,
// `<__array_function__ internals>`, or a `sitecustomize.py` (gpumem's Python observer is one).
bool IsLibraryPythonFile(absl::string_view file);

// How a Python file prints in text: an installed package's path from the package on
// (`.../site-packages/torch/nn/modules/linear.py` -> `torch/nn/modules/linear.py`), the standard
// library's from `pythonX.Y/` on (`/usr/lib/python3.12/threading.py` -> `python3.12/threading.py`),
// anything else as recorded (co_filename).
std::string ShortPythonPath(absl::string_view file);

// What one call site is (report/cli/cmd_report.cc groups stacks by it).
enum class GroupBy {
  kUser,    // the innermost frame of the user's own code (report/stacks/user_frames.h)
  kPython,  // the whole Python stack
  kStack,   // the whole stack, native and Python frames
};
// "user", "python", "stack"; false for anything else.
bool ParseGroupBy(absl::string_view text, GroupBy* group_by);

// The frame that names a call site under `group_by`: kUser, the innermost frame of the user's code
// (UserFrame), else the innermost Python frame; kPython, the innermost Python frame; kStack, or
// without such a frame, the innermost frame. nullptr for no frames.
const Frame* CallSiteFrame(const std::vector<Frame>& frames, GroupBy group_by);

// A frame's part of a call-site key: a Python frame by its full path, line and function; a native
// one as printed.
std::string FrameKey(const Frame& frame);

// The text that identifies a stack's call site for the analyses (growth, OOM, iterations,
// kernels): stacks with equal keys are one call site. kUser: the user frame (UserFrame); without
// one, the innermost Python frame, or the whole stack without Python frames (a library's stacks
// stay apart, so the allocations of one library call still mark iterations); kPython: the Python
// frames, or the whole stack without any; kStack: all frames. Python frames count by full path,
// line and function. The tables of call sites merge a library's stacks further (GroupSites).
std::string CallSiteKey(const std::vector<Frame>& frames, GroupBy group_by);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_STACKS_PYTHON_STACKS_H_
