// The in-process recorder: what the hooks in interpose/ (and later cupti/) call. It owns the
// trace file, the interning tables and the per-thread state. Every function here is safe to call
// from any hook, in any thread, before main, during exit and in a child after fork; none of them
// throws or changes errno; when recording fails the program carries on and the failure is counted.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/kernel_table.h"
#include "core/trace_ids.h"

namespace gpumem {

struct MemoryRecord {
  uint64_t seq = 0;  // from NextSeq(): after the call for allocations, before it for frees
  proto::Api api = proto::Api::kUnknown;
  proto::MemoryKind kind = proto::MemoryKind::kUnknown;
  proto::Action action = proto::Action::kUnknown;
  int32_t device = -1;
  int32_t result = 0;
  uint64_t size = 0;
  uint64_t address = 0;
  uint64_t stream = 0;
  uint64_t pool = 0;
  uint64_t handle = 0;
  uint64_t offset = 0;
  uint64_t pitch = 0;
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
  uint64_t stack_id = 0;
  uint64_t capture = 0;  // the stream capture this was made for (core/stream_capture.h), or 0
};

// One kernel or graph launch, as an interposed entry point or a CUPTI callback saw it.
struct LaunchRecord {
  uint64_t seq = 0;  // from NextSeq(), before the call
  proto::LaunchApi api = proto::LaunchApi::kUnknown;
  int32_t device = -1;
  void* function = nullptr;         // the CUfunction (null for a graph launch)
  const char* name_hint = nullptr;  // the kernel's name if the caller knows it (CUPTI)
  uint32_t grid[3] = {0, 0, 0};
  uint32_t block[3] = {0, 0, 0};
  uint32_t shared_memory_bytes = 0;
  uint64_t stream = 0;
  uint64_t correlation_id = 0;
  uint64_t stack_id = 0;
  uint64_t graph = 0;
  int32_t result = 0;
  // The parameters, as cuLaunchKernel takes them: an array of pointers to each value, or the
  // `extra` list (CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE). Read during RecordLaunch() only.
  void* const* kernel_params = nullptr;
  void* const* extra = nullptr;
  bool from_cupti = false;
};

struct RecorderOptions;  // core/options.h

// What the recorder needs from the interposer: the real loader functions (ours are hooked).
struct LoaderFunctions {
  void* (*dlopen)(const char*, int);
  void* (*dlsym)(void*, const char*);
};

namespace recorder {

// Reads options, loads libunwind, registers fork handlers. Idempotent; called from the preload
// library's constructor and again lazily by the first hook if that runs earlier.
void Init(const LoaderFunctions& loader);
bool Enabled();
#ifdef GPUMEM_BENCH_BUILD
// The benchmarks' build only (libgpumem_bench.so): while paused every hook only forwards, so one
// process can alternate windows with and without recording and measure gpumem's cost free of the
// variation between processes. A trace with pauses misses their events.
void SetPausedForBenchmark(bool paused);
#endif
// The options read by Init() (defaults before it). cupti/ takes its settings from here.
const RecorderOptions& Options();

uint64_t NextSeq();
// Interned id of the current native stack, starting at the caller of the hooked API (the frame
// that returns to `caller_pc`). 0 when stacks are off or unavailable.
uint64_t CaptureStack(uintptr_t caller_pc);
// The same, launch stacks: at most GPUMEM_LAUNCH_STACK_DEPTH frames; 0 when launch stacks are off.
uint64_t CaptureLaunchStack(uintptr_t caller_pc);
// Whether frees capture stacks too (GPUMEM_FREE_STACKS).
bool FreeStacks();
// Appends one memory event (fills in thread and time). Opens the trace at the first event.
void RecordMemory(const MemoryRecord& record);
// How to ask the driver about kernels (driver::PrepareKernelQueries sets them once it can reach
// libcuda; the first call's are kept).
void SetKernelQueries(const KernelQueries& queries);
// Appends one launch event (fills in thread, time, kernel id and the pointer-sized parameter
// values that fall inside device memory recorded so far).
void RecordLaunch(const LaunchRecord& record);
// Whether launch events are recorded at all (GPUMEM_LAUNCHES, default on).
bool LaunchesEnabled();

// What became of the CUPTI subscriber (cupti/), and what it delivers.
void RecordCuptiStatus(proto::CuptiState state, const char* detail, bool kernel_timing);
void RecordKernelTiming(uint64_t correlation_id, uint64_t start_ns, uint64_t end_ns,
                        int32_t device);
void RecordPoolUsage(uint64_t pool, int32_t device, uint64_t reserved_bytes, uint64_t used_bytes,
                     uint64_t timestamp_ns, uint64_t correlation_id);
// A stream capture began (ended == false) or ended, with what the call returned.
void RecordStreamCapture(uint64_t capture, uint64_t stream, proto::CaptureMode mode, bool ended,
                         int32_t result);
// A Python reference taken to recorded memory (gpumem's Python observer, through the exported
// gpumem_note_python_holder): its stack is the caller's, less the observer's own Python frame.
void RecordPythonHolder(uint64_t address, uint64_t size, const char* how, uintptr_t caller_pc);
// An out-of-memory error the framework raised (gpumem's Python observer, through the exported
// gpumem_note_out_of_memory); its stack is the caller's, less the observer's own Python frame.
inline constexpr size_t kMaxOomMessage = 2048;  // bytes of the message kept
struct FrameworkOomRecord {
  int32_t device = -1;
  proto::OomSource source = proto::OomSource::kUnknown;
  uint64_t requested = 0;
  bool requested_from_message = false;
  uint64_t allocated = 0;
  uint64_t reserved = 0;
  uint64_t limit = 0;
  uint64_t device_free = 0;
  const char* message = nullptr;  // NUL-terminated, or nullptr
};
void RecordFrameworkOom(const FrameworkOomRecord& oom, uintptr_t caller_pc);
// A backward pass began (its stack: the caller's, less the observer's frame) or ended.
void RecordBackwardPass(uint64_t pass, bool ended, uintptr_t caller_pc);
// Writes a Device packet the first time `ordinal` is announced.
bool DeviceKnown(int ordinal);
void RecordDevice(int ordinal, const char* name, uint64_t total_memory);
// A driver entry point was handed out unwrapped (its real pointer differed from the one seen).
void CountHookConflict();
// A program's operation that reached a hook while gpumem was at work on the same thread (a
// signal handler that interrupted it, or a call from within gpumem): forwarded, not recorded.
// Counted while recording is enabled; the footer says how many.
void CountReentrantEvent();

// Runs fn(arg) on the calling thread's own stack (core/own_stack.h), mapped with its per-thread
// state at its first use: for gpumem's deep and rare work, which a small stack has no room for.
void RunOnOwnStack(void (*fn)(void*), void* arg);
template <typename Fn>
void OnOwnStack(Fn&& fn) {
  using Callable = std::remove_reference_t<Fn>;
  RunOnOwnStack([](void* callable) { (*static_cast<Callable*>(callable))(); }, &fn);
}

// The status the process passed to exit() (or returned from main), for the footer.
void NoteExitStatus(int status);
// Writes the footer and trims the file. Events after it are still recorded.
void Finish();
void AfterForkInChild();

}  // namespace recorder
}  // namespace gpumem
