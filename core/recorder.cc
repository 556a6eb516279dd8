#include "core/recorder.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>

#include "core/clock.h"
#include "core/driver_queries.h"
#include "core/eh_frame_unwinder.h"
#include "core/hot_path.h"
#include "core/kernel_table.h"
#include "core/module_map.h"
#include "core/option_table.h"
#include "core/options.h"
#include "core/own_stack.h"
#include "core/packet_sink.h"
#include "core/python_frames.h"
#include "core/self_timing.h"
#include "core/spin_lock.h"
#include "core/stack_capture.h"
#include "core/stack_table.h"
#include "core/thread_flags.h"
#include "core/thread_locals.h"
#include "core/trace_format.h"
#include "core/trace_framing.h"
#include "core/trace_sink.h"
#include "core/version.h"
#include "core/wire_writer.h"

namespace gpumem::recorder {
namespace {

constexpr size_t kThreadCacheSlots = 1024;
constexpr size_t kTemplateSlots = 4096;  // a power of two; 12 bits of a compact_ref's head
constexpr size_t kTemplateWays = 4;      // slots a template may take (AppendEvent)
using proto::AddressIndex;
using proto::kAddressEntries;
using proto::kLaunchPointerEntries;  // by template slot: 66 KiB, pages touched as used
using proto::ZigZag;
constexpr size_t kMaxPointerArgs = 32;

// A launch template's pointers as its last launch passed them (the key: its template's).
struct LaunchPointers {
  uint64_t key;
  uint64_t pointers[kMaxPointerArgs];
};

// A thread's memory and launch events as templates (every field but seq, timestamp, correlation
// id and the address-like values; core/trace.proto, compact_ref): an event whose template is in
// its slot is written as a reference to the full event that defined the slot, with deltas against
// the thread's previous event and its addresses coded against a table of recent ones (2 KiB, as
// few cache lines as the event has addresses). 32 KiB of keys, touched only where used: a thread
// that records few events touches a page or two.
struct EventTemplates {
  // Mixed into every key: changed at each registration, so that a state reused by another thread,
  // or in a new trace after fork, finds none of its keys (without clearing 32 KiB).
  uint64_t salt;
  uint64_t last_seq;
  uint64_t last_timestamp;
  uint64_t last_correlation;  // of the previous launch (memory events have none)
  uint64_t last_address;      // the previous address value coded (a literal's base)
  bool started;               // the next full event tells the reader the table starts anew
  // Events left to write before every template and the table start anew (GPUMEM_RESYNC_EVENTS):
  // a reader that lost packets to damage knows this thread's events again from there on.
  uint64_t until_resync;
  uint64_t addresses[kAddressEntries];  // by AddressIndex: what the reader's mirror holds
  // By slot: (template hash ^ salt) | 1, without kRecentBit (TemplateKey), with it for the slot of
  // its set used last; 0: never set.
  alignas(kTemplateWays * sizeof(uint64_t)) uint64_t keys[kTemplateSlots];
  // By slot % kLaunchPointerEntries: a reference's pointers equal to these are coded as runs.
  LaunchPointers launch_pointers[kLaunchPointerEntries];
};

// Per-thread state lives in its own pages (not in TLS) so the TLS block stays a few bytes:
// libgpumem may also be dlopen'd (CUDA_INJECTION64_PATH), where static TLS is scarce. It holds
// what taking a stack needs (kilobytes, which a hook on a small stack does not have), and the
// thread's own stack lies below it in the same mapping (core/own_stack.h), a guard page under that.
struct ThreadState {
  uint32_t generation;  // the trace file this state belongs to (a child after fork starts anew)
  uint32_t tid;
  struct CachedStack {
    uint64_t hash;
    uint64_t id;
  } stack_cache[kThreadCacheSlots];
  ThreadState* next_free;
  uint64_t frames[kMaxStackDepth + 1];  // one more than kept: whether the stack was cut
  UnwindScratch unwind;
  PythonFrame python_frames[kMaxPythonFrames];
  // A new stack's Python frames as interned.
  uint64_t python_codes[kMaxPythonFrames];
  uint64_t python_lines[kMaxPythonFrames];
  uint64_t python_groups[kMaxPythonFrames];
  // This state's number in the trace (EventRef.writer), from 1: kept when the state is reused by
  // another thread, so the numbers stay as few as the threads that record at once.
  uint32_t writer;
  EventTemplates templates;  // last: its pages are touched only as slots are used
};
constexpr size_t kPageBytes = 4096;
constexpr size_t kThreadStateBytes = (sizeof(ThreadState) + kPageBytes - 1) & ~(kPageBytes - 1);
constexpr size_t kThreadMappingBytes = kPageBytes + kOwnStackBytes + kThreadStateBytes;

// The calling thread's state (ThreadLocals::thread_state).
ThreadState* ThisThread() { return static_cast<ThreadState*>(Locals().thread_state); }
void SetThisThread(ThreadState* state) { Locals().thread_state = state; }

enum OpenState : int { kNotOpen = 0, kOpening = 1, kOpen = 2, kOpenFailed = 3 };
enum PythonState : int { kPythonNotFound = 0, kPythonFound = 1 };

struct State {
  std::atomic<int> init_state{0};
#ifdef GPUMEM_BENCH_BUILD
  std::atomic<bool> paused{false};  // SetPausedForBenchmark(); next to what every hook reads
#endif
  // Read by every event, written rarely: together, before the options' switches, in two cache
  // lines (in a framework each line gpumem reads is a likely miss at every event).
  bool stacks_available = false;
  std::atomic<int> open_state{kNotOpen};
  std::atomic<uint32_t> generation{1};
  std::atomic<int> python_state{0};  // PythonState
  std::atomic<bool> python_status_written{false};
  std::atomic<bool> kernel_queries_set{false};
  std::atomic<uint64_t> devices_written{0};  // bit per device ordinal below 64
  // The span of device addresses allocated so far: a kernel parameter value outside it is not a
  // pointer to recorded memory. Grows only.
  std::atomic<uint64_t> span_low{~uint64_t{0}};
  std::atomic<uint64_t> span_high{0};
  KernelTable kernels;           // every launch reads where its slots are: here, not past `modules`
  RecorderOptions options;       // its switches first (core/options.h)
  KernelQueries kernel_queries;  // read at a new kernel only
  LoaderFunctions loader{};
  TraceSink sink;
  StackTable stacks;
  ModuleMap modules;
  PythonCodeTable python_codes;
  // Python: looked for at the first stack (and again now and then until found), its status
  // written once per trace file.
  std::atomic<uint32_t> python_retry{0};
  std::atomic_flag python_lock = ATOMIC_FLAG_INIT;
  PythonStatusInfo python_info;
  // Written by every event of every thread: a cache line of its own, so that reading what lies
  // around it (the span, the generation, the options) does not miss after another thread's event.
  alignas(64) std::atomic<uint64_t> next_seq{1};
  alignas(64) std::atomic<uint64_t> events_dropped{0};
  std::atomic<uint64_t> events_reentrant{0};  // CountReentrantEvent()
  std::atomic<uint64_t> stacks_failed{0};
  std::atomic<uint64_t> hook_conflicts{0};
  std::atomic<uint32_t> writers{0};         // thread states mapped so far (their writer numbers)
  std::atomic<uint64_t> template_salts{0};  // registrations so far (their salts)
  uint32_t pid = 0;
  uint32_t parent_pid = 0;
  uint64_t start_unix_ns = 0;
  uint64_t start_mono_ns = 0;
  char host[256] = {};
  char command_line[16384] = {};  // NUL-separated, as in /proc/self/cmdline
  size_t command_line_size = 0;
  char path[4352] = {};
  std::atomic<uint64_t> stopped_at_seq{0};  // when recording stopped: the first seq not recorded
  std::atomic<bool> exit_status_known{false};
  int exit_status = 0;
  pthread_key_t thread_key{};
  std::atomic_flag free_list_lock = ATOMIC_FLAG_INIT;
  ThreadState* free_list = nullptr;
};

constinit State g;

void RecordingStopped(uint64_t first_unrecorded_seq);

class FileSink final : public PacketSink {
 public:
  bool AppendPacket(const uint8_t* data, size_t size) override {
    if (g.sink.Append(data, size)) return true;
    g.events_dropped.fetch_add(1, std::memory_order_relaxed);
    // The packet of an event (or of its stack) whose number was taken last.
    if (g.sink.ClaimStopNotice()) [[unlikely]]
      RecordingStopped(g.next_seq.load(std::memory_order_relaxed) - 1);
    return false;
  }
};
GPUMEM_HOT_DATA constinit FileSink g_file_sink;

uint64_t Now(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void ReadCommandLine() {
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, g.command_line, sizeof(g.command_line) - 1);
  close(fd);
  g.command_line_size = n > 0 ? static_cast<size_t>(n) : 0;
}

bool PathIsDirectory(const char* path) {
  struct stat info;
  return stat(path, &info) == 0 && S_ISDIR(info.st_mode);
}

// Whether `path` is a regular file that begins like a gpumem trace (its first packet a Header).
bool IsTraceFile(const char* path) {
  const int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return false;
  struct stat info;
  char start[32];
  ssize_t size = 0;
  if (fstat(fd, &info) == 0 && S_ISREG(info.st_mode)) size = read(fd, start, sizeof(start));
  close(fd);
  return size > 0 && framing::BeginsWithHeaderPacket(start, static_cast<size_t>(size));
}

// snprintf for a file name: false (errno ENAMETOOLONG) rather than a name cut short.
__attribute__((format(printf, 3, 4))) bool FormatPath(char* out, size_t size, const char* format,
                                                      ...) {
  va_list arguments;
  va_start(arguments, format);
  const int length = vsnprintf(out, size, format, arguments);
  va_end(arguments);
  if (length >= 0 && static_cast<size_t>(length) < size) return true;
  errno = ENAMETOOLONG;
  return false;
}

// The name a process of the session takes when GPUMEM_OUTPUT is taken: X.trace becomes
// X-<pid>.trace, another X becomes X-<pid>: the part before the suffix into `stem` (false if it
// does not fit), the suffix into *suffix.
bool SuffixedName(const char* output, const char* pid, char* stem, size_t stem_size,
                  const char** suffix) {
  const size_t length = strlen(output);
  static constexpr char kSuffix[] = ".trace";
  constexpr size_t kSuffixLength = sizeof(kSuffix) - 1;
  const bool traced =
      length > kSuffixLength && strcmp(output + length - kSuffixLength, kSuffix) == 0;
  const size_t stem_length = traced ? length - kSuffixLength : length;
  *suffix = traced ? kSuffix : "";
  return FormatPath(stem, stem_size, "%.*s-%s", static_cast<int>(stem_length), output, pid);
}

// The first process of a recording session owns GPUMEM_OUTPUT; it removes a stale trace there so
// that the file can be claimed exclusively by whichever process of the session records first.
// Anything else there is the user's: left as it is, said once (every process then records under
// the pid-suffixed name).
void ClaimSession() {
  if (getenv("GPUMEM_SESSION_PID") != nullptr) return;
  char pid_text[16];
  snprintf(pid_text, sizeof(pid_text), "%u", g.pid);
  setenv("GPUMEM_SESSION_PID", pid_text, 1);
  const char* output = g.options.output;
  struct stat info;
  if (output[0] == '\0' || lstat(output, &info) != 0 || PathIsDirectory(output)) return;
  if (IsTraceFile(output)) {
    unlink(output);
    return;
  }
  char stem[sizeof(g.path)];
  const char* suffix = "";
  if (!SuffixedName(output, "<pid>", stem, sizeof(stem), &suffix)) return;
  char line[1024];  // as long as Warn() writes; a longer one is cut
  if (snprintf(line, sizeof(line), "'%s' is not a gpumem trace: left as it is; traces go to '%s%s'",
               output, stem, suffix) > 0) {
    Warn(line);
  }
}

void ThreadExited(void* value) {
  OwnWorkScope own_work;  // a signal handler's hook here only forwards: the list is locked
  auto* state = static_cast<ThreadState*>(value);
  if (ThisThread() == state) {
    SetThisThread(nullptr);
    SetThreadStack(0, 0);
  }
  SpinGuard guard(g.free_list_lock);
  state->next_free = g.free_list;
  g.free_list = state;
}

// Creates the first free one of `stem` + `suffix`, `stem`-1 + `suffix`, `stem`-2 + `suffix`, ...
// as g.path: a name that exists (an earlier process of the same pid, a planted link) is skipped,
// never followed or truncated.
bool OpenFreeName(const char* stem, const char* suffix) {
  constexpr int kAttempts = 100;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    const bool named = attempt == 0
                           ? FormatPath(g.path, sizeof(g.path), "%s%s", stem, suffix)
                           : FormatPath(g.path, sizeof(g.path), "%s-%d%s", stem, attempt, suffix);
    if (!named) return false;
    if (g.sink.Open(g.path)) return true;
    if (errno != EEXIST) return false;
  }
  return false;
}

// Picks the file name by the rules in the README (GPUMEM_OUTPUT) and opens it.
bool OpenTraceFile() {
  const char* output = g.options.output;
  char stem[sizeof(g.path)];
  if (output[0] == '\0' || PathIsDirectory(output)) {
    const bool named =
        output[0] == '\0'
            ? FormatPath(stem, sizeof(stem), "gpumem-%s-%u", g.host, g.pid)
            : FormatPath(stem, sizeof(stem), "%s/gpumem-%s-%u", output, g.host, g.pid);
    return named && OpenFreeName(stem, ".trace");
  }
  if (!FormatPath(g.path, sizeof(g.path), "%s", output)) return false;
  if (g.sink.Open(g.path)) return true;
  if (errno != EEXIST) return false;
  // Another process of the session holds the name, or a file that is no trace does.
  char pid[16];
  snprintf(pid, sizeof(pid), "%u", g.pid);
  const char* suffix = "";
  return SuffixedName(output, pid, stem, sizeof(stem), &suffix) && OpenFreeName(stem, suffix);
}

void WriteOption(wire::Writer& writer, const char* name, const char* value) {
  size_t option = writer.BeginNested(proto::header_field::kOption);
  writer.String(proto::option_field::kName, name);
  writer.String(proto::option_field::kValue, value);
  writer.EndNested(option);
}

// Rank, local rank and world size, each only where the environment set it (fields with presence).
void WriteDistributedIdentity(wire::Writer& writer) {
  if (g.options.rank >= 0) writer.Int32Present(proto::header_field::kRank, g.options.rank);
  if (g.options.local_rank >= 0) {
    writer.Int32Present(proto::header_field::kLocalRank, g.options.local_rank);
  }
  if (g.options.world_size >= 0) {
    writer.Int32Present(proto::header_field::kWorldSize, g.options.world_size);
  }
}

// Every recorder option of core/option_table.h with its value (texts only where set), the trace
// file as opened for GPUMEM_OUTPUT, and whether stacks could be taken.
void WriteOptionsInForce(wire::Writer& writer) {
  for (const OptionSpec& spec : kOptionTable) {
    char number[32];
    const char* value = strcmp(spec.name, "GPUMEM_OUTPUT") == 0
                            ? g.path
                            : OptionValueText(spec, g.options, number, sizeof(number));
    if (value != nullptr) WriteOption(writer, spec.name, value);
  }
  WriteOption(writer, "libunwind", g.stacks_available ? "loaded" : "unavailable");
#ifdef GPUMEM_BENCH_BUILD
  WriteOption(writer, "libgpumem", "bench build: recording may be paused");
#endif
}

void WriteHeader() {
  static uint8_t buffer[sizeof(g.command_line) + sizeof(RecorderOptions) + 4096];
  wire::Writer writer(buffer, sizeof(buffer));
  size_t packet = writer.BeginNested(proto::trace_field::kPacket);
  size_t header = writer.BeginNested(proto::packet_field::kHeader);
  writer.Varint(proto::header_field::kFormatVersion,
                g.options.event_refs ? proto::kFormatVersion : proto::kFormatVersionWithoutRefs);
  writer.String(proto::header_field::kHost, g.host);
  writer.Varint(proto::header_field::kPid, g.pid);
  writer.Varint(proto::header_field::kParentPid, g.parent_pid);
  for (size_t at = 0; at < g.command_line_size;) {
    size_t length = strnlen(g.command_line + at, g.command_line_size - at);
    writer.RepeatedBytes(proto::header_field::kCommandLine, g.command_line + at, length);
    at += length + 1;
  }
  writer.Varint(proto::header_field::kStartTimeUnixNs, g.start_unix_ns);
  writer.Varint(proto::header_field::kStartTimeMonoNs, g.start_mono_ns);
  WriteOptionsInForce(writer);
  writer.String(proto::header_field::kRecorderVersion, kVersion);
  writer.Bool(proto::header_field::kStacksUnavailable, !g.stacks_available);
  WriteDistributedIdentity(writer);
  writer.EndNested(header);
  writer.EndNested(packet);
  if (!writer.overflowed()) g_file_sink.AppendPacket(writer.data(), writer.size());
}

GPUMEM_COLD bool OpenTrace() {
  if (!OpenTraceFile()) {
    char reason[256];
    snprintf(reason, sizeof(reason), "': %s; the program runs on without recording",
             strerror(errno));
    Warn("cannot write the trace to '", g.path, reason);
    return false;
  }
  WriteHeader();
  g.modules.Refresh(g_file_sink);
  return true;
}

GPUMEM_COLD bool OpenOnce() {
  int state = g.open_state.load(std::memory_order_acquire);
  if (state == kOpenFailed) return false;
  int expected = kNotOpen;
  if (g.open_state.compare_exchange_strong(expected, kOpening)) {
    bool opened = false;
    OnOwnStack([&] { opened = OpenTrace(); });
    g.open_state.store(opened ? kOpen : kOpenFailed, std::memory_order_release);
    return opened;
  }
  while ((state = g.open_state.load(std::memory_order_acquire)) == kOpening) sched_yield();
  return state == kOpen;
}

GPUMEM_HOT bool EnsureOpen() {
  return g.open_state.load(std::memory_order_acquire) == kOpen || OpenOnce();
}

// The thread's next event of each template is a full one again (a salt never used before: odd
// multiples of a constant whose bits are spread, so two salts differ in many bits), and the
// address table starts anew, which its first full event says (writer_started).
GPUMEM_COLD void StartTemplatesAnew(EventTemplates* templates) {
  templates->salt =
      (g.template_salts.fetch_add(1, std::memory_order_relaxed) * 2 + 1) * 0x9e3779b97f4a7c15ull;
  memset(templates->addresses, 0, sizeof(templates->addresses));
  templates->last_address = 0;
  templates->started = true;
  templates->until_resync =
      g.options.resync_events > 0 ? static_cast<uint64_t>(g.options.resync_events) : ~uint64_t{0};
}

// A thread's state, not yet registered in a trace file, and its own stack: mapped (mmap is
// async-signal-safe, malloc is not), or one a finished thread left.
GPUMEM_COLD ThreadState* NewThreadState() {
  ThreadState* state = nullptr;
  {
    SpinGuard guard(g.free_list_lock);
    if (g.free_list != nullptr) {
      state = g.free_list;
      g.free_list = state->next_free;
    }
  }
  if (state == nullptr) {
    void* memory = mmap(nullptr, kThreadMappingBytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory == MAP_FAILED) return nullptr;
    mprotect(memory, kPageBytes, PROT_NONE);  // an overflow of the own stack faults
    state = reinterpret_cast<ThreadState*>(static_cast<uint8_t*>(memory) + kThreadMappingBytes -
                                           kThreadStateBytes);
    state->writer = g.writers.fetch_add(1, std::memory_order_relaxed) + 1;
  }
  state->generation = 0;
  pthread_setspecific(g.thread_key, state);
  SetThisThread(state);
  const auto stack_high = reinterpret_cast<uintptr_t>(state);
  SetThreadStack(stack_high - kOwnStackBytes, stack_high);
  return state;
}

}  // namespace

GPUMEM_COLD void RunOnOwnStack(void (*fn)(void*), void* arg) {
  if (ThisThread() == nullptr) NewThreadState();
  RunOnThreadStack(fn, arg);
}

namespace {

// The calling thread's state, registered (its Thread packet written) in the current trace file.
GPUMEM_COLD ThreadState* RegisterThread(ThreadState* state, uint32_t generation) {
  if (state == nullptr && (state = NewThreadState()) == nullptr) return nullptr;
  memset(state->stack_cache, 0, sizeof(state->stack_cache));
  // The reader may have templates and a table for this writer number from the state's previous
  // thread, or none (after fork).
  StartTemplatesAnew(&state->templates);
  state->generation = generation;
  state->tid = static_cast<uint32_t>(gettid());

  char name[17] = {};
  prctl(PR_GET_NAME, name, 0, 0, 0);
  uint8_t buffer[96];
  wire::Writer writer(buffer, sizeof(buffer));
  size_t packet = writer.BeginNested(proto::trace_field::kPacket);
  size_t thread = writer.BeginNested(proto::packet_field::kThread);
  writer.Varint(proto::thread_field::kTid, state->tid);
  writer.String(proto::thread_field::kName, name);
  writer.EndNested(thread);
  writer.EndNested(packet);
  g_file_sink.AppendPacket(writer.data(), writer.size());
  return state;
}

GPUMEM_HOT ThreadState* CurrentThread() {
  ThreadState* state = ThisThread();
  const uint32_t generation = g.generation.load(std::memory_order_relaxed);
  if (state != nullptr && state->generation == generation) [[likely]]
    return state;
  return RegisterThread(state, generation);
}

GPUMEM_HOT void WidenDeviceSpan(uint64_t address, uint64_t size) {
  const uint64_t end = address + size < address ? ~uint64_t{0} : address + size;
  uint64_t low = g.span_low.load(std::memory_order_relaxed);
  while (address < low && !g.span_low.compare_exchange_weak(low, address)) {
  }
  uint64_t high = g.span_high.load(std::memory_order_relaxed);
  while (end > high && !g.span_high.compare_exchange_weak(high, end)) {
  }
}

// Values of the launch's pointer-sized parameters that fall inside the device span, deduplicated,
// into `out` (at most `capacity`); returns how many. Parameters come as cuLaunchKernel takes them.
constexpr uintptr_t kLaunchParamEnd = 0x00;
constexpr uintptr_t kLaunchParamBufferPointer = 0x01;
constexpr uintptr_t kLaunchParamBufferSize = 0x02;

GPUMEM_HOT size_t PointerArgs(const KernelInfo& kernel, const LaunchRecord& record, uint64_t* out,
                              size_t capacity) {
  const uint64_t low = g.span_low.load(std::memory_order_relaxed);
  const uint64_t high = g.span_high.load(std::memory_order_relaxed);
  if (low >= high) return 0;
  const uint8_t* buffer = nullptr;  // the `extra` form: one buffer at the params' offsets
  size_t buffer_size = 0;
  if (record.kernel_params == nullptr && record.extra != nullptr) {
    for (size_t i = 0; i < 16 && reinterpret_cast<uintptr_t>(record.extra[i]) != kLaunchParamEnd;
         i += 2) {
      const auto key = reinterpret_cast<uintptr_t>(record.extra[i]);
      if (key == kLaunchParamBufferPointer) {
        buffer = static_cast<const uint8_t*>(record.extra[i + 1]);
      } else if (key == kLaunchParamBufferSize && record.extra[i + 1] != nullptr) {
        buffer_size = *static_cast<const size_t*>(record.extra[i + 1]);
      }
    }
    if (buffer == nullptr) return 0;
  } else if (record.kernel_params == nullptr) {
    return 0;
  }
  // Candidates are gathered without a branch per word: whether a word falls in the span is
  // data, not pattern, and PyTorch's struct parameters (strides, sizes) mispredicted often enough
  // to make the scan of 536 bytes cost ~0.5 µs. Deduplicated afterwards, when there are few.
  constexpr size_t kCandidates = 64;
  uint64_t candidates[kCandidates + 1];
  size_t found = 0;
  size_t count = 0;
  size_t scanned = 0;
  const uint64_t span = high - low;
  // A bit per value's hash: a value whose bit is clear is new without comparing it to the others
  // (a quadratic search was a tenth of the recorder's samples on a PyTorch step).
  uint64_t seen_bits = 0;
  const auto keep_candidates = [&] {
    for (size_t c = 0; c < found && count < capacity; ++c) {
      const uint64_t value = candidates[c];
      const uint64_t bit = uint64_t{1} << ((value * 0x9e3779b97f4a7c15ull) >> 58);
      bool seen = false;
      if (seen_bits & bit) {
        for (size_t i = 0; i < count && !seen; ++i) seen = out[i] == value;
      }
      seen_bits |= bit;
      if (!seen) out[count++] = value;
    }
    found = 0;
  };
  for (size_t p = 0; p < kernel.param_count; ++p) {
    const PointerSizedParam& param = kernel.params[p];
    const uint8_t* value;
    if (buffer != nullptr) {
      if (param.offset + param.size > buffer_size) continue;
      value = buffer + param.offset;
    } else {
      value = static_cast<const uint8_t*>(record.kernel_params[param.index]);
      if (value == nullptr) continue;
    }
    scanned += param.size;
    // Each aligned word: a pointer member of a struct parameter is found too.
    for (size_t at = 0; at + sizeof(uint64_t) <= param.size; at += sizeof(uint64_t)) {
      uint64_t word;
      memcpy(&word, value + at, sizeof(word));
      candidates[found] = word;
      found += word - low < span;  // one unsigned compare: low <= word < high
      if (found == kCandidates) keep_candidates();
    }
  }
  keep_candidates();
  self_timing::Count(self_timing::kParamBytesScanned, scanned);
  return count;
}

}  // namespace

namespace {

void InitOnce(const LoaderFunctions& loader) {
  LoadRecorderOptions(&g.options);
  self_timing::g_enabled = g.options.self_timing;
  g.loader = loader;
  driver::SetLoader(loader);
  g.pid = static_cast<uint32_t>(getpid());
  InitClock();
  g.start_unix_ns = Now(CLOCK_REALTIME);
  g.start_mono_ns = Now(CLOCK_MONOTONIC);
  gethostname(g.host, sizeof(g.host) - 1);
  ReadCommandLine();
  if (g.options.enabled) {
    ClaimSession();
    pthread_key_create(&g.thread_key, &ThreadExited);
    g.stacks.Init();
    g.kernels.Init();
    if (g.options.python_frames) g.python_codes.Init();
    if (g.options.stack_depth > 0) {
      g.stacks_available = InitStackCapture(g.options.libunwind_path, g.options.fast_unwind,
                                            loader.dlopen, loader.dlsym);
      if (!g.stacks_available) {
        Warn(
            "libunwind.so.8 could not be loaded; allocations are recorded without stacks "
            "(install libunwind8 or set GPUMEM_LIBUNWIND)");
      }
    }
  }
}

// Init's work on a stack mapped for it (reading the options alone takes 14 KiB, and the first hook
// may come on a small stack), or on the caller's if none can be mapped.
void InitOnOwnStack(const LoaderFunctions& loader) {
  constexpr size_t kBytes = kPageBytes + kOwnStackBytes;
  void* memory = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED) {
    InitOnce(loader);
    return;
  }
  mprotect(memory, kPageBytes, PROT_NONE);
  gpumem_call_on_stack(
      [](void* argument) { InitOnce(*static_cast<const LoaderFunctions*>(argument)); },
      const_cast<LoaderFunctions*>(&loader), static_cast<uint8_t*>(memory) + kBytes);
  munmap(memory, kBytes);
}

}  // namespace

void Init(const LoaderFunctions& loader) {
  int expected = 0;
  if (!g.init_state.compare_exchange_strong(expected, 1)) {
    while (g.init_state.load(std::memory_order_acquire) == 1) sched_yield();
    return;
  }
  InitOnOwnStack(loader);
  g.init_state.store(2, std::memory_order_release);
}

#ifndef GPUMEM_BENCH_BUILD
GPUMEM_HOT bool Enabled() {
  return g.init_state.load(std::memory_order_acquire) == 2 && g.options.enabled;
}
#else
GPUMEM_HOT bool Enabled() {
  return g.init_state.load(std::memory_order_acquire) == 2 && g.options.enabled &&
         !g.paused.load(std::memory_order_relaxed);
}

void SetPausedForBenchmark(bool paused) { g.paused.store(paused, std::memory_order_relaxed); }
#endif

const RecorderOptions& Options() { return g.options; }

GPUMEM_HOT uint64_t NextSeq() { return g.next_seq.fetch_add(1, std::memory_order_relaxed); }

GPUMEM_HOT bool FreeStacks() { return g.options.free_stacks; }

namespace {

void WritePythonStatus() {
  if (g.python_status_written.exchange(true)) return;
  uint8_t buffer[512];
  wire::Writer writer(buffer, sizeof(buffer));
  const size_t packet = writer.BeginNested(proto::trace_field::kPacket);
  const size_t status = writer.BeginNested(proto::packet_field::kPythonStatus);
  writer.String(proto::python_status_field::kVersion, g.python_info.version);
  writer.Bool(proto::python_status_field::kSupported, g.python_info.supported);
  writer.String(proto::python_status_field::kDetail, g.python_info.detail);
  writer.EndNested(status);
  writer.EndNested(packet);
  if (!writer.overflowed()) g_file_sink.AppendPacket(writer.data(), writer.size());
}

// Finds the interpreter; whether it was found.
GPUMEM_COLD bool FindPythonNow() {
  if (g.python_lock.test_and_set(std::memory_order_acquire)) return false;  // another looks
  bool found = false;
  OnOwnStack([&] {
    found = g.python_state.load(std::memory_order_relaxed) == kPythonNotFound &&
            FindPython(g.loader.dlsym, &g.python_info);
  });
  if (found) {
    if (g.python_info.supported) {
      g.python_codes.UseFoundPython();
      // Native frames above the eval loop are the interpreter's, which the Python frames
      // replace: unwinding them was up to half of a PyTorch stack's frames.
      uintptr_t start = 0;
      uintptr_t end = 0;
      OnOwnStack([&] {
        if (!g.options.interpreter_frames && EvalLoopRange(g.loader.dlsym, &start, &end)) {
          SetStackEnd(start, end);
        }
      });
    }
    g.python_state.store(kPythonFound, std::memory_order_release);
  }
  g.python_lock.clear(std::memory_order_release);
  return g.python_state.load(std::memory_order_acquire) != kPythonNotFound;
}

// Whether this thread's Python frames are to be read (the trace is open).
GPUMEM_HOT bool PythonWanted() {
  if (!g.options.python_frames) return false;
  // Looked for at the first call; in a process without one, again every 4096th call (libpython
  // may be dlopen'd later, and each look costs a few dlsym misses).
  if (g.python_state.load(std::memory_order_acquire) == kPythonNotFound &&
      ((g.python_retry.fetch_add(1, std::memory_order_relaxed) & 4095) != 0 || !FindPythonNow())) {
    return false;
  }
  if (!g.python_status_written.load(std::memory_order_relaxed)) [[unlikely]]
    WritePythonStatus();
  return g.python_info.supported;
}

// A stack that missed the thread's cache, as CaptureStackOfDepth took it.
struct TakenStack {
  uintptr_t caller_pc;
  size_t depth;
  uint64_t hash;
  uint64_t* frames;  // unwritten when !frames_written (the unwinder's note stood for them)
  size_t count;
  bool truncated;
  bool frames_written;
  const PythonFrame* python_frames;
  size_t python_count;
  bool python_truncated;
  uintptr_t anchor;  // CaptureStackOfDepth's, for taking the stack again from the same place
};

// Interns a stack not in the process's table (its packets written), on the thread's own stack:
// its code objects first (PythonCode packets), lines looked up. Its id; 0 on failure.
GPUMEM_COLD uint64_t InternNewStack(const TakenStack& taken, ThreadState* thread) {
  uint64_t id = 0;
  OnOwnStack([&] {
    for (size_t i = 0; i < taken.python_count; ++i) {
      thread->python_codes[i] = g.python_codes.Intern(taken.python_frames[i], g_file_sink);
      thread->python_lines[i] =
          g.python_codes.Line(thread->python_codes[i], taken.python_frames[i]);
      thread->python_groups[i] = taken.python_frames[i].group;
    }
    const PythonStackFrames python_stack{thread->python_codes, thread->python_lines,
                                         thread->python_groups, taken.python_count,
                                         taken.python_truncated};
    id = g.stacks.Intern(taken.hash, taken.frames, taken.count, taken.truncated, python_stack,
                         g_file_sink, g.modules);
  });
  return id;
}

// Its id in the process's table, interned there when new; 0 on failure.
GPUMEM_COLD uint64_t FindOrInternStack(const TakenStack& taken, ThreadState* thread) {
  uint64_t id = g.stacks.Find(taken.hash);
  if (id != 0) return id;
  if (taken.count > 0 && !taken.frames_written) {
    // A new stack, whose frames the note stood for: taken again, copied this time (the same
    // call site and stack pointer: a replay). On the caller's stack, which it reads.
    self_timing::Scope native_timing(self_timing::kNativeStack, false);
    const size_t again = gpumem::CaptureStack(taken.caller_pc, taken.frames, taken.depth + 1,
                                              &thread->unwind, nullptr, taken.anchor);
    if (std::min(again, taken.depth) != taken.count) return 0;
  }
  return InternNewStack(taken, thread);
}

// `python_skip`: innermost Python frames left out (a caller's own, written in Python).
GPUMEM_HOT uint64_t CaptureStackOfDepth(uintptr_t caller_pc, size_t depth, size_t python_skip = 0) {
  self_timing::Scope capture_timing(self_timing::kStackCapture);
  if (g.options.stack_depth == 0 || !EnsureOpen()) return 0;
  const bool python = PythonWanted();
  if (!g.stacks_available && !python) return 0;
  ThreadState* thread = CurrentThread();
  if (thread == nullptr) return 0;
  // The buffers are the thread's (never constructed: ReadPythonFrames writes what it returns).
  PythonFrame* python_frames = thread->python_frames;
  bool python_truncated = false;
  size_t python_count = 0;
  uint64_t* frames = thread->frames;
  // Where the unwinder expects the stack pointer: an address in this frame, the same each time.
  volatile char anchor_byte = 0;
  const auto anchor = reinterpret_cast<uintptr_t>(&anchor_byte);
  const bool native = g.stacks_available && depth > 0;
  if (native) PrefetchStack(anchor);  // the Python frames' walk hides the fetches
  if (python) {
    self_timing::Scope timing(self_timing::kPythonFrames);
    python_count = ReadPythonFrames(python_frames, kMaxPythonFrames, &python_truncated);
    python_skip = std::min(python_skip, python_count);
    python_frames += python_skip;
    python_count -= python_skip;
    // Activations are numbered from the innermost kept frame's.
    const uint32_t first_group = python_count > 0 ? python_frames[0].group : 0;
    for (size_t i = 0; i < python_count; ++i) python_frames[i].group -= first_group;
  }
  size_t count = 0;
  // One frame more than kept, to know whether the stack was cut. The hash comes with the frames,
  // from the unwinder's note when this thread took the same stack before (frames then unwritten).
  StackPrint print;
  print.kept = depth;
  print.hash = StackTable::kEmptyHash;
  if (native) {
    self_timing::Scope timing(self_timing::kNativeStack);
    count = gpumem::CaptureStack(caller_pc, frames, depth + 1, &thread->unwind, &print, anchor);
  }
  bool truncated = count > depth;
  if (truncated) count = depth;
  self_timing::Scope timing(self_timing::kStackLookup);
  if (count == 0 && python_count == 0) {
    g.stacks_failed.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  uint64_t hash = print.hash;
  if (python_count > 0) {
    hash = HashPythonFrames(hash, python_frames, python_count, python_truncated);
  }
  ThreadState::CachedStack& cached = thread->stack_cache[hash & (kThreadCacheSlots - 1)];
  if (cached.hash == hash) return cached.id;
  const TakenStack taken{caller_pc,
                         depth,
                         hash,
                         frames,
                         count,
                         truncated,
                         print.frames_written,
                         python_frames,
                         python_count,
                         python_truncated,
                         anchor};
  const uint64_t id = FindOrInternStack(taken, thread);
  if (id == 0) {
    g.stacks_failed.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  cached = {hash, id};
  return id;
}

}  // namespace

GPUMEM_HOT uint64_t CaptureStack(uintptr_t caller_pc) {
  return CaptureStackOfDepth(caller_pc, static_cast<size_t>(g.options.stack_depth));
}

GPUMEM_HOT uint64_t CaptureLaunchStack(uintptr_t caller_pc) {
  if (!g.options.launch_stacks) return 0;
  const int depth = std::min(g.options.stack_depth, g.options.launch_stack_depth);
  return depth > 0 ? CaptureStackOfDepth(caller_pc, static_cast<size_t>(depth)) : 0;
}

namespace {

// Memory and launch events are encoded the same way: their varint fields gathered in field order
// (an array indexed by field number - 1), then written by one loop (wire::PutVarintFields) after
// room for the two headers (packet, event) that are then prepended, without bounds checks (each
// caller's buffer holds its largest event). Both messages start with the same five fields
// (trace_ids.h). An event that repeats a template of its thread is written as an EventRef instead
// (core/trace.proto).
constexpr size_t kEventHeaderRoom = 2 * (1 + wire::kMaxVarintBytes);
static_assert(proto::memory_field::kSeq == 1 && proto::memory_field::kApi == 5 &&
              proto::launch_field::kSeq == 1 && proto::launch_field::kApi == 5);
static_assert(proto::memory_field::kTemplateSlot == proto::memory_field::kWriter + 1 &&
              proto::launch_field::kTemplateSlot == proto::launch_field::kWriter + 1 &&
              proto::memory_field::kWriterStarted == proto::memory_field::kWriter + 2 &&
              proto::launch_field::kWriterStarted == proto::launch_field::kWriter + 2);
constexpr size_t kNoCorrelation = ~size_t{0};
constexpr size_t kNoAddress = ~size_t{0};
// writer, template_slot and writer_started: each a two-byte tag and a varint.
constexpr size_t kTemplateFieldsRoom = 3 * (2 + wire::kMaxVarintBytes);

uint64_t Int32Field(int32_t value) { return static_cast<uint64_t>(static_cast<int64_t>(value)); }

GPUMEM_HOT void FillEventHead(uint64_t* fields, uint64_t seq, const ThreadState* thread,
                              int32_t device, uint64_t api) {
  fields[0] = seq;
  fields[1] = MonotonicNs();
  fields[2] = thread != nullptr ? thread->tid : static_cast<uint32_t>(gettid());
  fields[3] = Int32Field(device);
  fields[4] = api;
}

// An event as RecordMemory / RecordLaunch gathered it: varint fields [0, count) (index = field
// number - 1), and a launch's packed pointer arguments between fields [0, split) and
// [split, count), as field split + 1.
struct EventFields {
  uint32_t event_field;   // proto::packet_field::kMemory or kLaunch
  uint32_t writer_field;  // the message's `writer`; `template_slot` is the next one
  const uint64_t* values;
  size_t count;
  size_t split;
  const uint64_t* pointers;
  size_t pointer_count;
  size_t correlation;  // the index of correlation_id in values, or kNoCorrelation
  size_t address;      // the index of a memory event's address in values, or kNoAddress
  bool templated;      // false: always written in full, defining nothing (failed allocations)
};

// The event's address-like values (left out of its template) in the order the format codes them:
// a memory event's address, else a launch's pointers. Returns their count.
GPUMEM_HOT inline size_t EventAddresses(const EventFields& event, const uint64_t** values) {
  if (event.address != kNoAddress) {
    *values = event.values + event.address;
    return 1;
  }
  *values = event.pointers;
  return event.pointer_count;
}

// One word into a lane of the template hash; the rotation carries high bits down to where the next
// multiplication spreads them.
GPUMEM_HOT inline uint64_t HashWord(uint64_t lane, uint64_t word) {
  return std::rotl((lane ^ word) * 0x9fb21c651e98df25ull, 29);
}

// A field's word in the template: 0 for those left out of it.
GPUMEM_HOT inline uint64_t TemplateWord(const EventFields& event, size_t i) {
  return i == event.correlation || i == event.address ? 0 : event.values[i];
}

// The 64-bit hash of the event's template: every field but seq, timestamp, correlation id and
// address, the number of pointers, and which message it is. Two lanes: half the multiplications'
// latency in a row.
GPUMEM_HOT uint64_t TemplateHash(const EventFields& event) {
  uint64_t even = event.event_field;
  uint64_t odd = event.pointer_count;
  size_t i = 2;  // after seq and timestamp
  for (; i + 1 < event.count; i += 2) {
    even = HashWord(even, TemplateWord(event, i));
    odd = HashWord(odd, TemplateWord(event, i + 1));
  }
  if (i < event.count) even = HashWord(even, TemplateWord(event, i));
  // A finalizer (MurmurHash3's): every bit of both lanes reaches the slot's low bits.
  uint64_t hash = even ^ std::rotl(odd, 32);
  hash = (hash ^ (hash >> 33)) * 0xff51afd7ed558ccdull;
  hash = (hash ^ (hash >> 33)) * 0xc4ceb9fe1a85ec53ull;
  return hash ^ (hash >> 33);
}

// Prepends the headers to the body [body, end) (a `message_field` of a `trace_field`) and appends
// the packet to the trace; whether it was written.
GPUMEM_HOT bool AppendFramed(uint8_t* body, uint8_t* end, uint32_t trace_field,
                             uint32_t message_field) {
  uint8_t* start = body;
  if (message_field != 0) {
    start = wire::PrependHeader(start, message_field, static_cast<size_t>(end - start));
  }
  start = wire::PrependHeader(start, trace_field, static_cast<size_t>(end - start));
  return g_file_sink.AppendPacket(start, static_cast<size_t>(end - start));
}

// The event in full, with its writer and the slot it defines (0: none) when `writer` is not 0, and
// whether the writer's address table starts anew.
GPUMEM_HOT bool AppendFullEvent(const EventFields& event, uint32_t writer, uint64_t template_slot,
                                bool writer_started) {
  // The largest event: a launch's fields (a tag of at most two bytes and a varint each), its
  // packed pointers (tag, length, values), then writer and template_slot.
  constexpr size_t kMaxFields = proto::launch_field::kParamsUnknown;
  static_assert(proto::memory_field::kCapture <= kMaxFields);
  uint8_t buffer[kEventHeaderRoom + kMaxFields * (2 + wire::kMaxVarintBytes) +
                 (1 + wire::kMaxVarintBytes) + kMaxPointerArgs * wire::kMaxVarintBytes +
                 kTemplateFieldsRoom];
  uint8_t* body = buffer + kEventHeaderRoom;
  uint8_t* out = wire::PutVarintFields(body, 1, event.values, event.split);
  out = wire::PutPackedVarints(out, static_cast<uint32_t>(event.split + 1), event.pointers,
                               event.pointer_count);
  // The fields after the packed one (none for a memory event) are numbered from split + 2.
  out = wire::PutVarintFields(out, static_cast<uint32_t>(event.split + 2),
                              event.values + event.split, event.count - event.split);
  out = wire::PutVarintFieldAnyTag(out, event.writer_field, writer);
  out = wire::PutVarintFieldAnyTag(out, event.writer_field + 1, template_slot);
  out = wire::PutVarintFieldAnyTag(out, event.writer_field + 2, writer_started ? 1 : 0);
  return AppendFramed(body, out, proto::trace_field::kPacket, event.event_field);
}

// The event's address values as compact_ref codes (core/trace.proto) from `out`: a run of values
// equal to `same` (the template's last launch; nullptr: none) as its length, a hit in the table as
// the entry's index, a miss as a literal against the previous value. The table itself changes only
// once the packet is written (StoreAddresses); *last_address moves on with every value.
GPUMEM_HOT uint8_t* PutAddressCodes(uint8_t* out, const EventFields& event, const uint64_t* same,
                                    const EventTemplates& templates, uint64_t* last_address) {
  const uint64_t* values;
  const size_t count = EventAddresses(event, &values);
  size_t run = 0;
  for (size_t i = 0; i < count; ++i) {
    const uint64_t value = values[i];
    const uint64_t previous = *last_address;
    *last_address = value;
    if (same != nullptr && same[i] == value) {
      ++run;
      continue;
    }
    if (run > 0) out = wire::PutVarint(out, kAddressEntries + 2 * (run - 1));
    run = 0;
    const size_t index = AddressIndex(value);
    out = wire::PutVarint(out, templates.addresses[index] == value
                                   ? index
                                   : kAddressEntries + 2 * ZigZag(value - previous) + 1);
  }
  if (run > 0) out = wire::PutVarint(out, kAddressEntries + 2 * (run - 1));
  return out;
}

// After the event was written (in full or as a reference): its addresses into the table, in order,
// and a launch's pointers as its template's last.
GPUMEM_HOT void StoreAddresses(const EventFields& event, uint64_t key, size_t slot,
                               EventTemplates* templates) {
  const uint64_t* values;
  const size_t count = EventAddresses(event, &values);
  for (size_t i = 0; i < count; ++i) templates->addresses[AddressIndex(values[i])] = values[i];
  if (count > 0) templates->last_address = values[count - 1];
  if (event.address == kNoAddress && event.templated) {
    LaunchPointers& last = templates->launch_pointers[slot % kLaunchPointerEntries];
    last.key = key;
    memcpy(last.pointers, values, count * sizeof(uint64_t));
  }
}

// The event as a compact_ref to `slot` of its thread's templates.
GPUMEM_HOT bool AppendEventRef(const EventFields& event, const ThreadState& thread, size_t slot,
                               uint64_t key) {
  const EventTemplates& templates = thread.templates;
  uint8_t buffer[1 + wire::kMaxVarintBytes + (4 + 1 + kMaxPointerArgs) * wire::kMaxVarintBytes];
  uint8_t* body = buffer + 1 + wire::kMaxVarintBytes;
  const uint64_t seq_delta = ZigZag(event.values[0] - templates.last_seq - 1);
  const uint64_t correlation_delta =
      event.correlation == kNoCorrelation
          ? 0
          : ZigZag(event.values[event.correlation] - templates.last_correlation);
  const uint64_t head = ((uint64_t{thread.writer} - 1) << 12 | slot) << 2 |
                        uint64_t{correlation_delta != 0} << 1 | uint64_t{seq_delta != 0};
  uint8_t* out = wire::PutVarint(body, head);
  if (seq_delta != 0) out = wire::PutVarint(out, seq_delta);
  out = wire::PutVarint(out, ZigZag(event.values[1] - templates.last_timestamp));
  if (correlation_delta != 0) out = wire::PutVarint(out, correlation_delta);
  const uint64_t* same = nullptr;
  if (event.address == kNoAddress) {
    const LaunchPointers& last = templates.launch_pointers[slot % kLaunchPointerEntries];
    if (last.key == key) same = last.pointers;
  }
  uint64_t last_address = templates.last_address;
  out = PutAddressCodes(out, event, same, templates, &last_address);
  return AppendFramed(body, out, proto::trace_field::kCompactRef, 0);
}

// A template's slot is one of a set of kTemplateWays slots, chosen by its hash (the set's keys
// share a cache line): with one slot per hash, a thread's few hundred templates collide in a tenth
// of their slots, and two templates sharing one are both written in full at every use (on a loop of
// allocations and launches, a tenth of the events and a quarter of the bytes). A slot used is
// marked recent (once all of a set's are, only the last keeps its mark); a new template takes the
// first slot not marked.
constexpr uint64_t kRecentBit = 2;

GPUMEM_HOT uint64_t TemplateKey(uint64_t hash, uint64_t salt) {
  return ((hash ^ salt) | 1) & ~kRecentBit;
}

// The slot that holds `key` in the set of `hash` (true), or the one a new template takes.
GPUMEM_HOT bool FindTemplate(const uint64_t* keys, uint64_t hash, uint64_t key, size_t* slot) {
  const size_t set = hash & (kTemplateSlots - kTemplateWays);  // its first slot
  size_t unmarked = set;  // MarkRecent() leaves one of each set unmarked
  for (size_t way = kTemplateWays; way-- > 0;) {
    if ((keys[set + way] & ~kRecentBit) == key) {
      *slot = set + way;
      return true;
    }
    if ((keys[set + way] & kRecentBit) == 0) unmarked = set + way;
  }
  *slot = unmarked;
  return false;
}

GPUMEM_HOT void MarkRecent(uint64_t* keys, size_t slot) {
  if ((keys[slot] & kRecentBit) != 0) return;
  keys[slot] |= kRecentBit;
  const size_t set = slot & ~(kTemplateWays - 1);
  for (size_t way = 0; way < kTemplateWays; ++way) {
    if ((keys[set + way] & kRecentBit) == 0) return;
  }
  for (size_t way = 0; way < kTemplateWays; ++way) {
    if (set + way != slot) keys[set + way] &= ~kRecentBit;
  }
}

// Writes the event: as a reference where its thread wrote its template before, else in full
// (defining the template's slot). A slot, the address table and the thread's previous event change
// only when the packet was written (after recording stopped the sink refuses every packet).
GPUMEM_HOT void AppendEvent(ThreadState* thread, const EventFields& event) {
  if (thread == nullptr || !g.options.event_refs) {
    AppendFullEvent(event, 0, 0, false);
    return;
  }
  EventTemplates& templates = thread->templates;
  size_t slot = 0;
  uint64_t key = 0;
  bool found = false;
  bool written;
  if (event.templated) {
    const uint64_t hash = TemplateHash(event);
    key = TemplateKey(hash, templates.salt);
    found = FindTemplate(templates.keys, hash, key, &slot);
  }
  if (found && !templates.started) {
    written = AppendEventRef(event, *thread, slot, key);
  } else {
    written =
        AppendFullEvent(event, thread->writer, event.templated ? slot + 1 : 0, templates.started);
    if (written && event.templated) templates.keys[slot] = key;
    if (written) templates.started = false;
  }
  if (!written) return;
  if (event.templated) MarkRecent(templates.keys, slot);
  StoreAddresses(event, key, slot, &templates);
  templates.last_seq = event.values[0];
  templates.last_timestamp = event.values[1];
  if (event.correlation != kNoCorrelation) {
    templates.last_correlation = event.values[event.correlation];
  }
  // After this one (its addresses are in the table the next starts without).
  if (--templates.until_resync == 0) [[unlikely]]
    StartTemplatesAnew(&templates);
}

}  // namespace

GPUMEM_HOT void RecordMemory(const MemoryRecord& record) {
  if (!EnsureOpen()) return;
  self_timing::Scope timing(self_timing::kMemoryEvent);
  if (record.action == proto::Action::kAlloc && record.address != 0 &&
      record.kind != proto::MemoryKind::kVmmPhysical) {
    WidenDeviceSpan(record.address, record.size);
  }
  namespace f = proto::memory_field;
  constexpr size_t kFields = f::kCapture;
  uint64_t fields[kFields];
  ThreadState* thread = CurrentThread();
  FillEventHead(fields, record.seq, thread, record.device, static_cast<uint64_t>(record.api));
  fields[f::kKind - 1] = static_cast<uint64_t>(record.kind);
  fields[f::kAction - 1] = static_cast<uint64_t>(record.action);
  fields[f::kSize - 1] = record.size;
  fields[f::kAddress - 1] = record.address;
  fields[f::kStream - 1] = record.stream;
  fields[f::kPool - 1] = record.pool;
  fields[f::kResult - 1] = Int32Field(record.result);
  fields[f::kStackId - 1] = record.stack_id;
  fields[f::kHandle - 1] = record.handle;
  fields[f::kOffset - 1] = record.offset;
  fields[f::kFreeBytes - 1] = record.free_bytes;
  fields[f::kTotalBytes - 1] = record.total_bytes;
  fields[f::kPitch - 1] = record.pitch;
  fields[f::kCapture - 1] = record.capture;
  // A failed allocation's free and total bytes differ each time: never a template.
  const EventFields event{proto::packet_field::kMemory,
                          f::kWriter,
                          fields,
                          kFields,
                          kFields,
                          nullptr,
                          0,
                          kNoCorrelation,
                          f::kAddress - 1,
                          record.action != proto::Action::kAllocFailed};
  AppendEvent(thread, event);
}

void SetKernelQueries(const KernelQueries& queries) {
  if (g.kernel_queries_set.load(std::memory_order_acquire)) return;
  static std::atomic_flag lock = ATOMIC_FLAG_INIT;
  SpinGuard guard(lock);
  if (g.kernel_queries_set.load(std::memory_order_relaxed)) return;
  g.kernel_queries = queries;
  g.kernel_queries_set.store(true, std::memory_order_release);
}

GPUMEM_HOT bool LaunchesEnabled() { return Enabled() && g.options.launches; }

namespace {

// A kernel the table has not seen: the driver asked about it (its queries found first, while
// libcuda may still be loading), its KernelName written, on the thread's own stack (finding the
// queries is a dlopen). Launches of known kernels never get here.
GPUMEM_COLD const KernelInfo* LookUpNewKernel(const LaunchRecord& record) {
  const KernelInfo* kernel = nullptr;
  OnOwnStack([&] {
    driver::PrepareKernelQueries();
    const KernelQueries queries =
        g.kernel_queries_set.load(std::memory_order_acquire) ? g.kernel_queries : KernelQueries{};
    kernel = g.kernels.Lookup(record.function, record.name_hint, queries, g_file_sink);
  });
  return kernel;
}

}  // namespace

GPUMEM_HOT void RecordLaunch(const LaunchRecord& record) {
  if (!EnsureOpen()) return;
  self_timing::Scope timing(self_timing::kLaunchEvent);
  ThreadState* thread = CurrentThread();
  const KernelInfo* kernel = nullptr;
  if (record.function != nullptr) {
    self_timing::Scope lookup_timing(self_timing::kKernelLookup);
    kernel = g.kernels.Find(reinterpret_cast<uintptr_t>(record.function));
    if (kernel == nullptr) [[unlikely]]
      kernel = LookUpNewKernel(record);
  }
  uint64_t pointer_args[kMaxPointerArgs];
  size_t pointer_arg_count = 0;
  if (kernel != nullptr && kernel->params_known) {
    self_timing::Scope scan_timing(self_timing::kPointerScan);
    pointer_arg_count = PointerArgs(*kernel, record, pointer_args, kMaxPointerArgs);
  }
  // Encoded as memory events are; the packed pointers come after the fields before them, the two
  // flags after those.
  namespace f = proto::launch_field;
  static_assert(f::kPointerArgs == f::kGraph + 1 && f::kParamsUnknown == f::kFromCupti + 1 &&
                f::kFromCupti == f::kPointerArgs + 1);
  uint64_t fields[f::kParamsUnknown - 1];  // every field but the packed one
  FillEventHead(fields, record.seq, thread, record.device, static_cast<uint64_t>(record.api));
  fields[f::kKernelId - 1] = kernel != nullptr ? kernel->id : 0;
  fields[f::kGridX - 1] = record.grid[0];
  fields[f::kGridY - 1] = record.grid[1];
  fields[f::kGridZ - 1] = record.grid[2];
  fields[f::kBlockX - 1] = record.block[0];
  fields[f::kBlockY - 1] = record.block[1];
  fields[f::kBlockZ - 1] = record.block[2];
  fields[f::kSharedMemoryBytes - 1] = record.shared_memory_bytes;
  fields[f::kStream - 1] = record.stream;
  fields[f::kCorrelationId - 1] = record.correlation_id;
  fields[f::kStackId - 1] = record.stack_id;
  fields[f::kResult - 1] = Int32Field(record.result);
  fields[f::kGraph - 1] = record.graph;
  fields[f::kFromCupti - 2] = record.from_cupti ? 1 : 0;
  fields[f::kParamsUnknown - 2] =
      record.function != nullptr && (kernel == nullptr || !kernel->params_known) ? 1 : 0;
  const EventFields event{proto::packet_field::kLaunch,
                          f::kWriter,
                          fields,
                          f::kParamsUnknown - 1,
                          f::kGraph,
                          pointer_args,
                          pointer_arg_count,
                          f::kCorrelationId - 1,
                          kNoAddress,
                          true};
  AppendEvent(thread, event);
}

namespace {

// The footer into `buffer`: the counts so far and, once recording stopped, why; at exit with the
// exit status. Returns its size, 0 if it did not fit.
size_t BuildFooter(uint8_t* buffer, size_t capacity, bool at_exit) {
  wire::Writer writer(buffer, capacity);
  size_t packet = writer.BeginNested(proto::trace_field::kPacket);
  size_t footer = writer.BeginNested(proto::packet_field::kFooter);
  namespace f = proto::footer_field;
  writer.Varint(f::kEvents, g.next_seq.load() - 1);
  writer.Varint(f::kEventsDropped, g.events_dropped.load());
  writer.Varint(f::kEventsReentrant, g.events_reentrant.load());
  writer.Varint(f::kStacks, g.stacks.stacks_written());
  writer.Varint(f::kStacksFailed, g.stacks_failed.load());
  writer.Varint(f::kBytesWritten, g.sink.bytes_written());
  writer.Bool(f::kCleanExit, at_exit);
  writer.Varint(f::kEndTimeMonoNs, Now(CLOCK_MONOTONIC));
  if (at_exit && g.exit_status_known.load(std::memory_order_acquire)) {
    writer.Int32Present(f::kExitStatus, g.exit_status);
  }
  writer.Varint(f::kHookConflicts, g.hook_conflicts.load());
  const proto::RecordingStop stop = g.sink.stop_reason();
  writer.Varint(f::kStopReason, static_cast<uint64_t>(stop));
  if (stop != proto::RecordingStop::kNone) writer.Varint(f::kStoppedAtSeq, g.stopped_at_seq.load());
  writer.EndNested(footer);
  writer.EndNested(packet);
  return writer.overflowed() ? 0 : writer.size();
}

// At exit; and when recording stops, at once, so that the trace says why even if the process
// never exits (readers take the last footer). After a stop it goes into the room kept for it.
void WriteFooter(bool at_exit) {
  uint8_t buffer[256];
  size_t size = BuildFooter(buffer, sizeof(buffer), at_exit);
  if (size == 0 || g.sink.Append(buffer, size)) return;
  if (g.sink.ClaimStopNotice()) {
    // The footer itself found no room: recording stops here, after every event; this footer then
    // says so too.
    RecordingStopped(g.next_seq.load());
    size = BuildFooter(buffer, sizeof(buffer), at_exit);
  }
  g.sink.AppendLastRecord(buffer, size);
}

// Said once, the moment recording stops; the footer saying why is written at once.
GPUMEM_COLD void RecordingStopped(uint64_t first_unrecorded_seq) {
  g.stopped_at_seq.store(first_unrecorded_seq);
  OnOwnStack([] {
    char line[1024];  // as long as Warn() writes; a longer one is cut
    if (snprintf(line, sizeof(line),
                 "recording stopped: %s ('%s'); what was recorded is kept; the program runs on",
                 proto::RecordingStopText(g.sink.stop_reason()), g.path) > 0) {
      Warn(line);
    }
    WriteFooter(/*at_exit=*/false);
  });
}

// A small packet of one nested message, built by `fill(writer)`.
template <typename Fill>
void WriteSmallPacket(uint32_t field, Fill&& fill) {
  if (!EnsureOpen()) return;
  uint8_t buffer[1024];
  wire::Writer writer(buffer, sizeof(buffer));
  size_t packet = writer.BeginNested(proto::trace_field::kPacket);
  size_t message = writer.BeginNested(field);
  fill(writer);
  writer.EndNested(message);
  writer.EndNested(packet);
  if (!writer.overflowed()) g_file_sink.AppendPacket(writer.data(), writer.size());
}

}  // namespace

void RecordCuptiStatus(proto::CuptiState state, const char* detail, bool kernel_timing) {
  WriteSmallPacket(proto::packet_field::kCupti, [&](wire::Writer& writer) {
    writer.Varint(proto::cupti_field::kState, static_cast<uint64_t>(state));
    if (detail != nullptr) {
      writer.Bytes(proto::cupti_field::kDetail, detail, strnlen(detail, 900));
    }
    writer.Bool(proto::cupti_field::kKernelTiming, kernel_timing);
  });
}

void RecordKernelTiming(uint64_t correlation_id, uint64_t start_ns, uint64_t end_ns,
                        int32_t device) {
  WriteSmallPacket(proto::packet_field::kKernelTiming, [&](wire::Writer& writer) {
    namespace f = proto::kernel_timing_field;
    writer.Varint(f::kCorrelationId, correlation_id);
    writer.Varint(f::kStartNs, start_ns);
    writer.Varint(f::kEndNs, end_ns);
    writer.Int32(f::kDevice, device);
  });
}

void RecordPoolUsage(uint64_t pool, int32_t device, uint64_t reserved_bytes, uint64_t used_bytes,
                     uint64_t timestamp_ns, uint64_t correlation_id) {
  WriteSmallPacket(proto::packet_field::kPoolUsage, [&](wire::Writer& writer) {
    namespace f = proto::pool_usage_field;
    writer.Varint(f::kPool, pool);
    writer.Int32(f::kDevice, device);
    writer.Varint(f::kReservedBytes, reserved_bytes);
    writer.Varint(f::kUsedBytes, used_bytes);
    writer.Varint(f::kTimestampNs, timestamp_ns);
    writer.Varint(f::kCorrelationId, correlation_id);
  });
}

void RecordStreamCapture(uint64_t capture, uint64_t stream, proto::CaptureMode mode, bool ended,
                         int32_t result) {
  if (!EnsureOpen()) return;
  const uint64_t seq = NextSeq();
  ThreadState* thread = CurrentThread();
  WriteSmallPacket(proto::packet_field::kStreamCapture, [&](wire::Writer& writer) {
    namespace f = proto::stream_capture_field;
    writer.Varint(f::kSeq, seq);
    writer.Varint(f::kTimestampNs, MonotonicNs());
    writer.Varint(f::kTid, thread != nullptr ? thread->tid : static_cast<uint32_t>(gettid()));
    writer.Varint(f::kCapture, capture);
    writer.Varint(f::kStream, stream);
    writer.Varint(f::kMode, static_cast<uint64_t>(mode));
    writer.Varint(f::kEnded, ended ? 1 : 0);
    writer.Int32(f::kResult, result);
  });
}

void RecordPythonHolder(uint64_t address, uint64_t size, const char* how, uintptr_t caller_pc) {
  if (!EnsureOpen()) return;
  const uint64_t seq = NextSeq();
  // Python frames only: the native frames under the observer's call are ctypes and the
  // interpreter, the same for every holder, and tell the user nothing.
  const uint64_t stack_id = CaptureStackOfDepth(caller_pc, /*depth=*/0, /*python_skip=*/1);
  ThreadState* thread = CurrentThread();
  WriteSmallPacket(proto::packet_field::kPythonHolder, [&](wire::Writer& writer) {
    namespace f = proto::python_holder_field;
    writer.Varint(f::kSeq, seq);
    writer.Varint(f::kTimestampNs, MonotonicNs());
    writer.Varint(f::kTid, thread != nullptr ? thread->tid : static_cast<uint32_t>(gettid()));
    writer.Varint(f::kAddress, address);
    writer.Varint(f::kSize, size);
    writer.Varint(f::kStackId, stack_id);
    if (how != nullptr) writer.Bytes(f::kHow, how, strnlen(how, 64));
  });
}

void RecordFrameworkOom(const FrameworkOomRecord& oom, uintptr_t caller_pc) {
  if (!EnsureOpen()) return;
  const uint64_t seq = NextSeq();
  // Python frames only, as for holders: the native ones are the observer's ctypes call.
  const uint64_t stack_id = CaptureStackOfDepth(caller_pc, /*depth=*/0, /*python_skip=*/1);
  ThreadState* thread = CurrentThread();
  uint8_t buffer[kMaxOomMessage + 256];
  wire::Writer writer(buffer, sizeof(buffer));
  const size_t packet = writer.BeginNested(proto::trace_field::kPacket);
  const size_t message = writer.BeginNested(proto::packet_field::kFrameworkOom);
  namespace f = proto::framework_oom_field;
  writer.Varint(f::kSeq, seq);
  writer.Varint(f::kTimestampNs, MonotonicNs());
  writer.Varint(f::kTid, thread != nullptr ? thread->tid : static_cast<uint32_t>(gettid()));
  writer.Int32(f::kDevice, oom.device);
  writer.Varint(f::kSource, static_cast<uint64_t>(oom.source));
  writer.Varint(f::kRequested, oom.requested);
  writer.Bool(f::kRequestedFromMessage, oom.requested_from_message);
  writer.Varint(f::kAllocated, oom.allocated);
  writer.Varint(f::kReserved, oom.reserved);
  writer.Varint(f::kLimit, oom.limit);
  writer.Varint(f::kDeviceFree, oom.device_free);
  writer.Varint(f::kStackId, stack_id);
  if (oom.message != nullptr) {
    writer.Bytes(f::kMessage, oom.message, strnlen(oom.message, kMaxOomMessage));
  }
  writer.EndNested(message);
  writer.EndNested(packet);
  if (!writer.overflowed()) g_file_sink.AppendPacket(writer.data(), writer.size());
}

void RecordBackwardPass(uint64_t pass, bool ended, uintptr_t caller_pc) {
  if (!EnsureOpen()) return;
  const uint64_t seq = NextSeq();
  const uint64_t stack_id =
      ended ? 0 : CaptureStackOfDepth(caller_pc, /*depth=*/0, /*python_skip=*/1);
  ThreadState* thread = CurrentThread();
  WriteSmallPacket(proto::packet_field::kBackwardPass, [&](wire::Writer& writer) {
    namespace f = proto::backward_pass_field;
    writer.Varint(f::kSeq, seq);
    writer.Varint(f::kTimestampNs, MonotonicNs());
    writer.Varint(f::kTid, thread != nullptr ? thread->tid : static_cast<uint32_t>(gettid()));
    writer.Varint(f::kPass, pass);
    writer.Bool(f::kEnded, ended);
    writer.Varint(f::kStackId, stack_id);
  });
}

GPUMEM_HOT bool DeviceKnown(int ordinal) {
  if (ordinal < 0 || ordinal >= 64) return true;
  return (g.devices_written.load(std::memory_order_relaxed) >> ordinal) & 1;
}

void RecordDevice(int ordinal, const char* name, uint64_t total_memory) {
  if (ordinal < 0 || ordinal >= 64 || !EnsureOpen()) return;
  uint64_t bit = uint64_t{1} << ordinal;
  if (g.devices_written.fetch_or(bit) & bit) return;
  uint8_t buffer[512];
  wire::Writer writer(buffer, sizeof(buffer));
  size_t packet = writer.BeginNested(proto::trace_field::kPacket);
  size_t device = writer.BeginNested(proto::packet_field::kDevice);
  writer.Int32(proto::device_field::kOrdinal, ordinal);
  writer.String(proto::device_field::kName, name);
  writer.Varint(proto::device_field::kTotalMemory, total_memory);
  writer.EndNested(device);
  writer.EndNested(packet);
  g_file_sink.AppendPacket(writer.data(), writer.size());
}

void CountHookConflict() { g.hook_conflicts.fetch_add(1, std::memory_order_relaxed); }

void CountReentrantEvent() {
  if (Enabled()) g.events_reentrant.fetch_add(1, std::memory_order_relaxed);
}

void NoteExitStatus(int status) {
  g.exit_status = status;
  g.exit_status_known.store(true, std::memory_order_release);
}

void Finish() {
  if (g.open_state.load(std::memory_order_acquire) != kOpen) return;
  WriteFooter(/*at_exit=*/true);
  g.sink.Finish();
  self_timing::Print();
  if (self_timing::g_enabled) eh_frame_unwinder::PrintUnsupported();
}

void AfterForkInChild() {
  if (!Enabled()) return;
  // The parent's file, tables and thread states describe the parent; start a trace of our own.
  g.parent_pid = g.pid;
  g.pid = static_cast<uint32_t>(getpid());
  g.sink.AbandonAfterFork();
  g.stacks.Reset();
  g.modules.Reset();
  g.kernels.Reset();
  g.python_codes.Reset();
  g.python_status_written.store(false);
  g.python_lock.clear();
  g.span_low.store(~uint64_t{0});
  g.span_high.store(0);
  g.next_seq.store(1);
  g.events_dropped.store(0);
  g.events_reentrant.store(0);
  g.stopped_at_seq.store(0);
  g.stacks_failed.store(0);
  g.hook_conflicts.store(0);
  g.devices_written.store(0);
  g.free_list_lock.clear();
  g.generation.fetch_add(1);
  g.start_unix_ns = Now(CLOCK_REALTIME);
  g.start_mono_ns = Now(CLOCK_MONOTONIC);
  g.open_state.store(kNotOpen, std::memory_order_release);
}

}  // namespace gpumem::recorder
