// Every environment variable of gpumem's in one table: LoadRecorderOptions parses the recorder's
// options from it, the trace header records from it the options in force, and
// tests/core/option_table_test.cc checks README.md's table of variables against it (names and
// defaults). A constant array: reading it allocates nothing (preload library rules).
#pragma once

#include <cstddef>

#include "core/options.h"

namespace gpumem {

enum class OptionKind {
  kSwitch,  // a bool member: 1/true/yes or 0/false/no
  kNumber,  // an int member in [min, max]
  kText,    // a char array member, copied as given (cut to its size)
  kOther,   // not read by the recorder: gpumem itself, its Python observer, the fake CUDA
};

struct OptionSpec {
  const char* name;
  const char* default_text;  // as README.md's table gives it (without its backquotes)
  const char* meaning;       // one sentence
  OptionKind kind;
  size_t offset = 0;  // of the RecorderOptions member (kSwitch, kNumber, kText)
  size_t size = 0;    // of that member
  int min = 0;        // kNumber
  int max = 0;
};

// The RecorderOptions member an entry sets: its offset and size.
#define GPUMEM_OPTION_FIELD(member) \
  offsetof(RecorderOptions, member), sizeof(RecorderOptions::member)

inline constexpr OptionSpec kOptionTable[] = {
    {"GPUMEM_OUTPUT", "gpumem-<host>-<pid>.trace", "trace file or existing directory (see above)",
     OptionKind::kText, GPUMEM_OPTION_FIELD(output)},
    {"GPUMEM_ENABLE", "1", "0: every hook just forwards the call, nothing is written",
     OptionKind::kSwitch, GPUMEM_OPTION_FIELD(enabled)},
    {"GPUMEM_STACK_DEPTH", "64", "native frames kept per stack, 0–256; 0 records no stacks",
     OptionKind::kNumber, GPUMEM_OPTION_FIELD(stack_depth), 0, kMaxStackDepth},
    {"GPUMEM_FREE_STACKS", "0", "1: capture stacks on frees too (a stack walk per free)",
     OptionKind::kSwitch, GPUMEM_OPTION_FIELD(free_stacks)},
    {"GPUMEM_LIBUNWIND", "—",
     "path of libunwind.so.8 when it is not next to libgpumem.so or installed", OptionKind::kText,
     GPUMEM_OPTION_FIELD(libunwind_path)},
    {"GPUMEM_FAST_UNWIND", "1",
     "0: every native stack through libunwind instead of gpumem's own cached .eh_frame unwinder",
     OptionKind::kSwitch, GPUMEM_OPTION_FIELD(fast_unwind)},
    {"GPUMEM_PYTHON_HOLDERS", "1",
     "0: gpumem's Python observer does not record which list.append keeps a CUDA tensor",
     OptionKind::kOther},
    {"GPUMEM_PYTHON_TORCH", "1",
     "0: gpumem's Python observer leaves PyTorch alone: no record of its out-of-memory errors "
     "or backward passes",
     OptionKind::kOther},
    {"GPUMEM_PYTHON_FRAMES", "1",
     "0: stacks without Python frames (CPython 3.10–3.13 on x86-64 are read in-process)",
     OptionKind::kSwitch, GPUMEM_OPTION_FIELD(python_frames)},
    {"GPUMEM_INTERPRETER_FRAMES", "0",
     "1: native stacks go on through the Python interpreter to main() instead of ending at its "
     "eval loop",
     OptionKind::kSwitch, GPUMEM_OPTION_FIELD(interpreter_frames)},
    {"GPUMEM_LAUNCHES", "1", "0: kernel launches are not recorded (memory only)",
     OptionKind::kSwitch, GPUMEM_OPTION_FIELD(launches)},
    {"GPUMEM_LAUNCH_STACKS", "1", "0: launches are recorded without a stack", OptionKind::kSwitch,
     GPUMEM_OPTION_FIELD(launch_stacks)},
    {"GPUMEM_LAUNCH_STACK_DEPTH", "24",
     "native frames kept per launch stack (at most GPUMEM_STACK_DEPTH)", OptionKind::kNumber,
     GPUMEM_OPTION_FIELD(launch_stack_depth), 0, kMaxStackDepth},
    {"GPUMEM_CUPTI", "1", "0: no CUPTI subscriber; interposition alone records memory and launches",
     OptionKind::kSwitch, GPUMEM_OPTION_FIELD(cupti)},
    {"GPUMEM_CUPTI_LAUNCHES", "0",
     "1: CUPTI callbacks on the launch APIs too; implied by GPUMEM_KERNEL_TIMES=1",
     OptionKind::kSwitch, GPUMEM_OPTION_FIELD(cupti_launches)},
    {"GPUMEM_CUPTI_CATCH_ALL", "0",
     "1: CUPTI's memory callbacks stay on for the whole run instead of going off once gpumem's "
     "own wrappers are seen to catch every memory call",
     OptionKind::kSwitch, GPUMEM_OPTION_FIELD(cupti_catch_all)},
    {"GPUMEM_CUPTI_POOLS", "0", "1: CUPTI's memory-pool activity records too", OptionKind::kSwitch,
     GPUMEM_OPTION_FIELD(cupti_pools)},
    {"GPUMEM_EVENT_REFS", "1",
     "0: every event written in full (about 45 bytes an event, trace format 1, which gpumem "
     "versions before format 2 read), not as a reference to an earlier event it repeats",
     OptionKind::kSwitch, GPUMEM_OPTION_FIELD(event_refs)},
    {"GPUMEM_RESYNC_EVENTS", "262144",
     "events a recording thread writes before it writes each of its events in full again, so "
     "that a trace damaged in the middle is read again from there on (0: never; a restart costs "
     "one full event per distinct event that follows)",
     OptionKind::kNumber, GPUMEM_OPTION_FIELD(resync_events), 0, 1 << 30},
    {"GPUMEM_SELF_TIMING", "0",
     "1: gpumem's own time per recording phase and per hook, printed to stderr at exit",
     OptionKind::kSwitch, GPUMEM_OPTION_FIELD(self_timing)},
    {"GPUMEM_TENSORS", "unset",
     "set by gpumem record --tensors to what it changed; copied into the trace header",
     OptionKind::kText, GPUMEM_OPTION_FIELD(tensors)},
    {"GPUMEM_KERNEL_TIMES", "0", "1: GPU start/end of every kernel from CUPTI activity records",
     OptionKind::kSwitch, GPUMEM_OPTION_FIELD(kernel_times)},
    {"GPUMEM_CUPTI_LIB", "—",
     "path of libcupti.so when it is not found next to libcudart, in the CUDA install or a "
     "framework's nvidia/*/lib",
     OptionKind::kText, GPUMEM_OPTION_FIELD(cupti_path)},
    {"GPUMEM_LIBRARY", "../lib/libgpumem.so from gpumem", "the preload library gpumem record uses",
     OptionKind::kOther},
    {"GPUMEM_SYMBOL_PATH", "—",
     "colon-separated directories searched for binaries whose recorded path does not exist here",
     OptionKind::kOther},
    {"GPUMEM_SESSION_PID", "set by gpumem",
     "marks the processes of one recording run (do not set it yourself)", OptionKind::kOther},
    {"GPUMEM_FAKE_DEVICE_MEMORY", "2 GiB", "the fake CUDA's device memory (tests only)",
     OptionKind::kOther},
    {"GPUMEM_FAKE_DEVICE_COUNT", "1", "the fake CUDA's device count (tests only)",
     OptionKind::kOther},
    // The frameworks' allocator settings, recorded where set: they say which allocator made the
    // trace's allocations, and the native allocator's options for its model.
    {"PYTORCH_CUDA_ALLOC_CONF", "unset", "PyTorch's allocator settings", OptionKind::kText,
     GPUMEM_OPTION_FIELD(pytorch_alloc_conf)},
    {"XLA_PYTHON_CLIENT_ALLOCATOR", "unset", "JAX's allocator", OptionKind::kText,
     GPUMEM_OPTION_FIELD(xla_allocator)},
    {"TF_GPU_ALLOCATOR", "unset", "TensorFlow's allocator", OptionKind::kText,
     GPUMEM_OPTION_FIELD(tf_allocator)},
};

#undef GPUMEM_OPTION_FIELD

// The value of a recorder option as the trace header records it: "1"/"0", the number (formatted
// into `buffer`), the text; nullptr for an unset text and for a variable the recorder does not
// read.
const char* OptionValueText(const OptionSpec& spec, const RecorderOptions& options, char* buffer,
                            size_t capacity);

}  // namespace gpumem
