// Python frames of the calling thread, read in-process at the moment of an allocation or launch
// (DESIGN "Python frames"). PyTorch releases the GIL around every operator, so the frames are read
// from the thread's own PyThreadState WITHOUT the GIL: plain loads through CPython's per-version
// struct layouts, never a call that may allocate a Python object or take a lock. CPython is found
// at run time (dlsym), never linked, and only versions whose layout is known here (3.10–3.13,
// x86-64, the default GIL build) are read; any other records no frames and says why.
//
// The thread's own frame chain cannot change under us: the thread is inside a C call (the hooked
// CUDA API), and only the thread itself pushes and pops its frames. The code objects and strings
// are kept alive by those frames. Pointers are still checked (alignment, object types, a depth
// bound) so that a torn or unknown state stops the walk rather than crashing the host.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/packet_sink.h"

namespace gpumem {

inline constexpr size_t kMaxPythonFrames = 128;

// Where the fields this file reads live, for one CPython version (byte offsets, x86-64).
struct PythonLayout {
  int minor = 0;  // 3.<minor>; 0: no layout
  // Thread state -> innermost frame: *(tstate + thread_frame), then, when cframe_frame >= 0,
  // *(that + cframe_frame) (3.11 and 3.12 keep the frame in a _PyCFrame).
  uint32_t thread_frame = 0;
  int32_t cframe_frame = -1;
  bool frame_objects = false;  // 3.10: PyFrameObject chain (f_back, f_lasti in code units)
  uint32_t frame_code = 0;
  uint32_t frame_previous = 0;
  uint32_t frame_instr = 0;      // 3.10: int f_lasti; 3.11+: _Py_CODEUNIT* prev_instr / instr_ptr
  int32_t frame_owner = -1;      // 3.11+: char owner
  int32_t frame_is_entry = -1;   // 3.11: bool is_entry (first frame of its C-level eval)
  int32_t cstack_owner = -1;     // 3.12+: owner value of the C-stack shim frames
  uint32_t code_size = 16;       // ob_size (3.11+: code units in co_code_adaptive)
  uint32_t code_first_line = 0;  // int co_firstlineno
  uint32_t code_filename = 0;
  uint32_t code_name = 0;      // co_qualname (3.11+), co_name before
  int32_t code_bytecode = -1;  // 3.11+: co_code_adaptive, where instruction offsets count from
  uint32_t ascii_data = 0;     // sizeof(PyASCIIObject): compact ASCII bytes start here
  uint32_t compact_data = 0;   // sizeof(PyCompactUnicodeObject): other compact strings
  bool ready_bit = false;      // 3.10/3.11: the state's `ready` bit must be set
};

// The layout of 3.<minor>, or one with minor == 0.
PythonLayout PythonLayoutFor(int minor);

// One Python frame as read: identities only (no strings, no line yet).
struct PythonFrame {
  uintptr_t code = 0;
  uintptr_t filename = 0;  // str object pointers: part of the code object's identity
  uintptr_t name = 0;
  int32_t first_line = 0;
  int32_t byte_offset = -1;  // of the instruction being executed; -1: not known
  uint32_t group = 0;        // interpreter activation, 0 = innermost
};

struct PythonStatusInfo {
  bool found = false;      // an interpreter is in the process
  bool supported = false;  // frames will be read
  char version[32] = {};
  char detail[256] = {};
};

// Looks for CPython in the process (the real dlsym on RTLD_DEFAULT) and decides whether its
// layout is known. Not thread-safe: the recorder calls it under its own lock. Returns
// `info->found`; when false it may be called again later (libpython dlopen'd afterwards).
bool FindPython(void* (*real_dlsym)(void*, const char*), PythonStatusInfo* info);

// The code of the interpreter's eval loop (_PyEval_EvalFrameDefault, from its symbol's size): the
// native frame under which each activation's Python frames run. False when it cannot be found.
bool EvalLoopRange(void* (*real_dlsym)(void*, const char*), uintptr_t* start, uintptr_t* end);

// Whether FindPython() found a supported interpreter.
bool PythonFramesAvailable();

// The calling thread's Python frames, innermost first, at most `capacity` (<= kMaxPythonFrames);
// *truncated when there were more. 0 when the thread has no Python frames (or none are read).
// `frames` may be uninitialised: each frame returned is written whole.
size_t ReadPythonFrames(PythonFrame* frames, size_t capacity, bool* truncated);

// Folds the frames into a stack hash (core/stack_table.h): the same native stack from two
// Python lines gives two hashes.
uint64_t HashPythonFrames(uint64_t hash, const PythonFrame* frames, size_t count, bool truncated);

// A str object as UTF-8 into `out` (NUL-terminated, cut at `capacity` - 1 bytes on a character
// boundary): compact strings only, read through `layout`; anything else (not a str of type
// `unicode_type`, a legacy string) gives "?". A surrogate-escaped byte (U+DC80..U+DCFF, a file
// name that is not UTF-8) becomes that byte. Returns the length.
size_t DecodePythonString(uintptr_t str, const PythonLayout& layout, uintptr_t unicode_type,
                          char* out, size_t capacity);

// Python code objects interned: a PythonCode packet is written once per code object, before the
// first Stack that refers to it, and the line of each (code object, instruction offset) is
// computed once (PyCode_Addr2Line reads only the immutable line table) and cached. Lookups are
// lock-free; inserts take a lock and publish the entry after its packet is written (as in
// core/stack_table.h). A code object freed and another allocated at its address is told apart by
// its filename, name and first line: it is interned again.
class PythonCodeTable {
 public:
  using Addr2Line = int (*)(void* code, int byte_offset);

  bool Init();
  void Reset();  // a new trace file (child after fork)

  // Set by the recorder once CPython is found (tests pass their own).
  void Configure(const PythonLayout& layout, uintptr_t unicode_type, Addr2Line addr2line);
  // The same, with what FindPython() found in this process.
  void UseFoundPython();

  // The PythonCode id of `frame`'s code object; 0 when the table is full or the packet could not
  // be written.
  uint64_t Intern(const PythonFrame& frame, PacketSink& sink);
  // The line `frame` is executing (0: not known); `code_id` from Intern().
  uint32_t Line(uint64_t code_id, const PythonFrame& frame);

  uint64_t codes_written() const { return next_id_.load(std::memory_order_relaxed) - 1; }

 private:
  struct CodeSlot {
    std::atomic<uint64_t> hash;  // published last
    uintptr_t code;
    uintptr_t filename;
    uintptr_t name;
    int32_t first_line;
    uint64_t id;
  };
  struct LineSlot {
    std::atomic<uint64_t> key;  // code id << 32 | byte offset + 1; published last
    uint32_t line;
  };
  static constexpr size_t kCodeSlots = size_t{1} << 17;
  static constexpr size_t kLineSlots = size_t{1} << 18;

  CodeSlot* codes_ = nullptr;
  LineSlot* lines_ = nullptr;
  std::atomic<uint64_t> next_id_{1};
  std::atomic<size_t> line_count_{0};
  std::atomic_flag code_lock_ = ATOMIC_FLAG_INIT;
  std::atomic_flag line_lock_ = ATOMIC_FLAG_INIT;
  PythonLayout layout_;
  uintptr_t unicode_type_ = 0;
  Addr2Line addr2line_ = nullptr;
};

}  // namespace gpumem
