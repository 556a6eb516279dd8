// Analyzer throughput: how fast ReplayTrace() (report/replay/replay.h, one thread) goes through a
// long trace, and that its peak RSS does not grow with the trace.
//
// For N events (default 50,000,000) and N/10, a child process records a synthetic trace with
// gpumem's own recorder (core/recorder.h: the real encoder, sink, Stack, Thread, Device and footer
// packets) into a temporary directory under $TMPDIR (or /tmp): two threads each allocate 5,000
// parameters and then run a training loop (RecordLoopThread: the same allocations and frees every
// step, from the same stacks, at addresses a pool hands out again, so most events are written as
// references to earlier ones), taking seq numbers as the hooks do (frees before the call,
// allocations after), so the file is slightly out of seq order where the threads race. With
// --random-addresses, they allocate and free random buffers around a live set of about 10,000
// instead (cudaMalloc, cudaMallocAsync, cudaMallocHost, a few failures; no event repeats). Then
// another child times ReplayTrace() on it (the file is in the page cache: this is the analyzer's
// CPU cost) and reports its own peak RSS (getrusage ru_maxrss), and one more times the read alone
// (ForEachMemoryEventBySeq with an empty visitor). Each trace is deleted after its runs, and the
// directory at exit (also on SIGINT/SIGTERM); N is bounded, and free space is checked first.
//
// With --gpumem, `gpumem report` itself is timed on both traces (events/s and peak RSS, which must
// not grow with the trace). With --ranks N, N traces of varied lengths (the largest --rank-events)
// are recorded into a directory, as the ranks of a multi-GPU job write them, and `gpumem report
// DIR` (each trace on a core of its own, as many at once as there are cores) is timed against
// `gpumem report` of the largest alone, and against the control: the same traces reported by as
// many independent `gpumem report` processes at once, which share only the machine (its ceiling).
//
// Usage: analyzer_throughput [EVENTS] [--runs R] [--compare], or --trace FILE to time an existing
// trace (see Usage()).
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/recorder.h"
#include "core/trace_ids.h"
#include "report/cli/worker_processes.h"
#include "report/replay/replay.h"
#include "report/trace/event_stream.h"
#include "report/trace/trace_file.h"

namespace {

using gpumem::MemoryRecord;
namespace recorder = gpumem::recorder;
namespace proto = gpumem::proto;

constexpr uint64_t kDefaultEvents = 50'000'000;
constexpr uint64_t kMaxEvents = 200'000'000;  // about 11 GiB of trace
constexpr uint64_t kBytesPerEventEstimate = 64;
constexpr int kThreads = 2;
constexpr size_t kLivePerThread = 5000;
constexpr uint32_t kSlotsPerThread = 8192;
constexpr int kStacks = 300;
constexpr int kStackBits = 9;         // 512 distinct call paths; kStacks of them are used
constexpr size_t kLoopTensors = 200;  // activations per step of the training loop, per thread
bool g_random_addresses = false;      // --random-addresses: RecordThread, not RecordLoopThread
bool g_launches = false;              // --launches: the training loop launches kernels too
constexpr uintptr_t kKernels = 64;    // distinct kernels the loop launches
constexpr size_t kKernelParams = 3;   // each takes three pointers

char g_dir[256] = {};
char g_trace[320] = {};
char g_ranks[320] = {};  // the directory of rank traces, while it exists

void RemoveFiles() {
  if (g_trace[0] != '\0') unlink(g_trace);
  if (g_ranks[0] != '\0') {
    std::error_code ignored;
    std::filesystem::remove_all(g_ranks, ignored);
  }
  if (g_dir[0] != '\0') rmdir(g_dir);
}

void OnSignal(int signal) {
  RemoveFiles();
  _exit(128 + signal);
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// ---- the recorded program ----

// Distinct call paths for distinct stacks: Descend() walks `depth` levels through Left() or
// Right() by the bits of `path`, then captures the stack as a hook would.
volatile int g_side = 0;
__attribute__((noinline)) uint64_t Descend(unsigned path, int depth);
__attribute__((noinline)) uint64_t Left(unsigned path, int depth) {
  const uint64_t id = Descend(path, depth);
  g_side = 1;  // different bodies (no identical code folding) and no tail call
  return id;
}
__attribute__((noinline)) uint64_t Right(unsigned path, int depth) {
  const uint64_t id = Descend(path, depth);
  g_side = 2;
  return id;
}
__attribute__((noinline)) uint64_t Descend(unsigned path, int depth) {
  if (depth == 0) {
    const uint64_t id =
        recorder::CaptureStack(reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
    g_side = 0;
    return id;
  }
  return (path & 1) ? Left(path >> 1, depth - 1) : Right(path >> 1, depth - 1);
}

// The CUDA call between a free's seq and its event (cudaFree takes microseconds; a short stand-in
// here): the other thread's events land in between, as they do in real traces.
volatile uint64_t g_call_work = 0;
void FakeCall() {
  for (int i = 0; i < 32; ++i) g_call_work = g_call_work + 1;
}

struct Buffer {
  uint64_t address;
  uint64_t size;
  uint32_t slot;
  proto::Api free_api;
  proto::MemoryKind free_kind;
  uint64_t stream;
};

// One thread of the recorded program: `events` memory events around kLivePerThread live buffers.
void RecordThread(int thread, uint64_t events, const std::vector<uint64_t>& stacks) {
  std::mt19937_64 random(1234 + thread);
  std::vector<Buffer> live;
  live.reserve(kSlotsPerThread);
  std::vector<uint32_t> free_slots;
  for (uint32_t slot = kSlotsPerThread; slot > 0; --slot) free_slots.push_back(slot - 1);
  // Each thread's buffers in an address range of its own, 1 GiB apart (sizes stay below that).
  const uint64_t base = (static_cast<uint64_t>(thread) + 1) << 44;
  for (uint64_t i = 0; i < events; ++i) {
    const uint64_t roll = random() % 1000;
    const bool allocate =
        !free_slots.empty() && (live.empty() || roll < (live.size() < kLivePerThread ? 550 : 450));
    MemoryRecord record;
    if (!allocate) {
      const size_t index = random() % live.size();
      const Buffer buffer = live[index];
      live[index] = live.back();
      live.pop_back();
      free_slots.push_back(buffer.slot);
      record.seq = recorder::NextSeq();  // a free takes its seq before the call
      record.api = buffer.free_api;
      record.kind = buffer.free_kind;
      record.action = proto::Action::kFree;
      record.address = buffer.address;
      record.stream = buffer.stream;
      FakeCall();
      recorder::RecordMemory(record);
      continue;
    }
    // Sizes log-uniform from 512 bytes to 256 MiB, in 512-byte units.
    const int shift = 9 + static_cast<int>(random() % 20);
    const uint64_t size = ((uint64_t{1} << shift) + random() % (uint64_t{1} << shift)) & ~511ull;
    // A few call sites allocate most: half of the allocations come from 10 stacks.
    const uint64_t stack = stacks[random() % 2 ? random() % 10 : random() % stacks.size()];
    const uint64_t kind = random() % 100;
    record.action = proto::Action::kAlloc;
    record.size = size;
    record.stack_id = stack;
    Buffer buffer{0, size, 0, proto::Api::kCudaFree, proto::MemoryKind::kUnknown, 0};
    if (kind < 75) {
      record.api = proto::Api::kCudaMalloc;
      record.kind = proto::MemoryKind::kDevice;
      record.device = 0;
    } else if (kind < 95) {
      record.api = proto::Api::kCudaMallocAsync;
      record.kind = proto::MemoryKind::kPool;
      record.device = 0;
      record.stream = 0x5000 + static_cast<uint64_t>(thread) * 16 + random() % 4;
      buffer = {0, size, 0, proto::Api::kCudaFreeAsync, proto::MemoryKind::kPool, record.stream};
    } else {
      record.api = proto::Api::kCudaMallocHost;
      record.kind = proto::MemoryKind::kPinnedHost;
      record.device = -1;
      buffer = {0, size, 0, proto::Api::kCudaFreeHost, proto::MemoryKind::kPinnedHost, 0};
    }
    if (random() % 10000 == 0) {  // out of memory, now and then
      record.action = proto::Action::kAllocFailed;
      record.result = 2;
      record.free_bytes = 1ull << 30;
      record.total_bytes = 80ull << 30;
      record.seq = recorder::NextSeq();
      recorder::RecordMemory(record);
      continue;
    }
    buffer.slot = free_slots.back();
    free_slots.pop_back();
    buffer.address = base + (uint64_t{buffer.slot} << 30);
    record.address = buffer.address;
    record.seq = recorder::NextSeq();  // an allocation takes its seq after the call
    recorder::RecordMemory(record);
    live.push_back(buffer);
  }
}

// The driver's answers about the loop's kernels (--launches), as cuFuncGetName and
// cuFuncGetParamInfo give them: kKernelParams pointers each. Functions are 1..kKernels.
int FakeKernelName(const char** name, void* function) {
  static char names[kKernels][32];
  const auto index = reinterpret_cast<uintptr_t>(function) - 1;
  if (index >= kKernels) return 400;  // CUDA_ERROR_INVALID_HANDLE
  if (names[index][0] == '\0')
    snprintf(names[index], sizeof(names[index]), "loop_kernel_%zu", index);
  *name = names[index];
  return 0;
}
int FakeKernelParamInfo(void*, size_t index, size_t* offset, size_t* size) {
  if (index >= kKernelParams) return 1;  // CUDA_ERROR_INVALID_VALUE: no more parameters
  *offset = index * sizeof(uint64_t);
  *size = sizeof(uint64_t);
  return 0;
}

// A kernel of the training loop (--launches) reading `pointers`, as a hook records it: its seq
// before the call, its stack, and the pointer parameters that fall in recorded allocations.
void RecordLoopLaunch(uintptr_t kernel, uint64_t stack, uint64_t stream, uint64_t correlation,
                      const uint64_t (&pointers)[kKernelParams]) {
  gpumem::LaunchRecord record;
  record.seq = recorder::NextSeq();
  record.api = proto::LaunchApi::kCuLaunchKernel;
  record.device = 0;
  record.function = reinterpret_cast<void*>(kernel % kKernels + 1);
  record.grid[0] = 1024;
  record.grid[1] = record.grid[2] = 1;
  record.block[0] = 256;
  record.block[1] = record.block[2] = 1;
  record.stream = stream;
  record.correlation_id = correlation;
  record.stack_id = stack;
  void* params[kKernelParams];
  for (size_t i = 0; i < kKernelParams; ++i) params[i] = const_cast<uint64_t*>(&pointers[i]);
  record.kernel_params = params;
  recorder::RecordLaunch(record);
}

// One tensor of the training loop: allocated and freed at the same point of every step.
struct LoopTensor {
  uint64_t size;
  uint64_t stack;
  proto::Api alloc_api;
  proto::Api free_api;
  proto::MemoryKind kind;
  int32_t device;
  uint64_t stream;
};

// Records one event of the training loop: an allocation of `tensor` at `address`, or its free.
void RecordLoopEvent(const LoopTensor& tensor, uint64_t address, bool allocate) {
  MemoryRecord record;
  record.api = allocate ? tensor.alloc_api : tensor.free_api;
  record.kind = tensor.kind;
  record.address = address;
  record.stream = tensor.stream;
  if (!allocate) {
    record.seq = recorder::NextSeq();  // a free takes its seq before the call
    record.action = proto::Action::kFree;
    FakeCall();
    recorder::RecordMemory(record);
    return;
  }
  record.action = proto::Action::kAlloc;
  record.size = tensor.size;
  record.stack_id = tensor.stack;
  record.device = tensor.device;
  record.seq = recorder::NextSeq();  // an allocation takes its seq after the call
  recorder::RecordMemory(record);
}

// One thread of a training loop, as users record it: kLivePerThread parameters allocated once,
// then steps that repeat the same kLoopTensors allocations and frees (the forward pass keeps its
// activations, the backward pass allocates and frees a gradient for each and frees it), from the
// same stacks, of the same sizes, at addresses an allocator's pool hands out again (nearly always
// the tensor's usual block, now and then one of three others). Most events repeat one of the
// thread's earlier events, which the recorder writes as references to it (trace format 2).
void RecordLoopThread(int thread, uint64_t events, const std::vector<uint64_t>& stacks) {
  std::mt19937_64 random(1234 + thread);
  const uint64_t base = (static_cast<uint64_t>(thread) + 1) << 44;
  auto random_tensor = [&] {
    const int shift = 9 + static_cast<int>(random() % 20);
    const uint64_t size = ((uint64_t{1} << shift) + random() % (uint64_t{1} << shift)) & ~511ull;
    const uint64_t stack = stacks[random() % 2 ? random() % 10 : random() % stacks.size()];
    if (random() % 100 < 80) {
      return LoopTensor{
          size, stack, proto::Api::kCudaMalloc, proto::Api::kCudaFree, proto::MemoryKind::kDevice,
          0,    0};
    }
    const uint64_t stream = 0x5000 + static_cast<uint64_t>(thread) * 16 + random() % 4;
    return LoopTensor{size,
                      stack,
                      proto::Api::kCudaMallocAsync,
                      proto::Api::kCudaFreeAsync,
                      proto::MemoryKind::kPool,
                      0,
                      stream};
  };
  uint64_t recorded = 0;
  // Parameters: live to the end. Each tensor owns a 1 GiB block of addresses (sizes stay below).
  for (uint64_t i = 0; i < kLivePerThread && recorded < events; ++i, ++recorded) {
    RecordLoopEvent(random_tensor(), base + (i << 30), true);
  }
  std::vector<LoopTensor> activations;
  std::vector<LoopTensor> gradients;
  for (size_t i = 0; i < kLoopTensors; ++i) {
    activations.push_back(random_tensor());
    gradients.push_back(random_tensor());
  }
  const uint64_t step_base = base + (uint64_t{kLivePerThread} << 30);
  // Tensor `i`'s block: its usual one, or now and then one of three others in its pool.
  auto address_of = [&](size_t i) {
    const uint64_t block = random() % 10 == 0 ? 1 + random() % 3 : 0;
    return step_base + (uint64_t{i} << 32) + (block << 30);
  };
  std::vector<uint64_t> addresses(kLoopTensors);
  uint64_t correlation = static_cast<uint64_t>(thread) << 40;
  // With --launches, a kernel after each allocation of a step writes it from the tensor before it
  // and a parameter: as many launches as memory events, about a PyTorch step's mix. Each launch
  // site has a stack of its own, which launches one kernel, as in PyTorch's traces (a launch's
  // stack ends at the launch call: the bundled train_mlp traces have 24 launch stacks, 23 of them
  // of one kernel).
  auto launch = [&](size_t site, uint64_t out, uint64_t in, const LoopTensor& tensor) {
    if (!g_launches || recorded >= events) return;
    const uint64_t pointers[kKernelParams] = {out, in, base + ((site % kLivePerThread) << 30)};
    const size_t launch_stack = site % stacks.size();
    RecordLoopLaunch(launch_stack, stacks[launch_stack], tensor.stream, ++correlation, pointers);
    ++recorded;
  };
  while (recorded < events) {
    for (size_t i = 0; i < kLoopTensors && recorded < events; ++i, ++recorded) {
      addresses[i] = address_of(i);
      RecordLoopEvent(activations[i], addresses[i], true);
      launch(i, addresses[i], addresses[i == 0 ? 0 : i - 1], activations[i]);
    }
    for (size_t i = kLoopTensors; i-- > 0 && recorded < events;) {
      const uint64_t gradient = address_of(kLoopTensors + i);
      RecordLoopEvent(gradients[i], gradient, true);
      launch(kLoopTensors + i, gradient, addresses[i], gradients[i]);
      if (++recorded < events) RecordLoopEvent(gradients[i], gradient, false);
      if (++recorded < events) RecordLoopEvent(activations[i], addresses[i], false);
      ++recorded;
    }
  }
}

// The child that records: returns its exit code.
int Generate(const std::string& path, uint64_t events) {
  const auto record_thread = g_random_addresses ? RecordThread : RecordLoopThread;
  setenv("GPUMEM_OUTPUT", path.c_str(), 1);
  unsetenv("GPUMEM_SESSION_PID");
  unsetenv("GPUMEM_ENABLE");
  recorder::Init(gpumem::LoaderFunctions{&dlopen, &dlsym});
  if (!recorder::Enabled()) return 1;
  recorder::RecordDevice(0, "analyzer_throughput device", 80ull << 30);
  if (g_launches) {
    gpumem::KernelQueries queries;
    queries.func_get_name = FakeKernelName;
    queries.func_get_param_info = FakeKernelParamInfo;
    recorder::SetKernelQueries(queries);
  }
  std::vector<uint64_t> stacks;
  for (unsigned path_bits = 0; path_bits < kStacks; ++path_bits) {
    const uint64_t id = Descend(path_bits, kStackBits);
    stacks.push_back(id != 0 ? id : path_bits + 1);  // libunwind missing: ids without packets
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    const uint64_t share = events / kThreads + (t < static_cast<int>(events % kThreads) ? 1 : 0);
    threads.emplace_back(record_thread, t, share, std::cref(stacks));
  }
  for (std::thread& thread : threads) thread.join();
  recorder::Finish();
  return 0;
}

// ---- the analyzer ----

uint64_t PeakRssKiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<uint64_t>(usage.ru_maxrss);
}

struct Measurement {
  uint64_t events = 0;
  uint64_t reordered = 0;
  uint64_t out_of_order = 0;
  uint64_t anomalies = 0;
  double seconds = 0;
  uint64_t peak_rss_kib = 0;
  bool ok = false;
};

enum class Mode { kReplay, kReadOnly, kInMemory };
size_t g_window = gpumem::report::kReorderWindow;  // --window

Measurement Analyze(const std::string& path, Mode mode) {
  Measurement m;
  const auto start = std::chrono::steady_clock::now();
  switch (mode) {
    case Mode::kReplay: {
      if (g_window != gpumem::report::kReorderWindow) {  // what ReplayTrace() does, other window
        gpumem::report::Replay replay;
        absl::StatusOr<gpumem::report::StreamedTrace> streamed =
            gpumem::report::ForEachMemoryEventBySeq(
                path, [&](const gpumem::MemoryEvent& event) { replay.Add(event); }, g_window);
        if (!streamed.ok()) return m;
        const std::vector<gpumem::report::PlaceUsage> places = replay.Places();
        m.seconds = Seconds(start);
        m.events = streamed->stats.events + streamed->file->launch_event_count();
        m.out_of_order = streamed->stats.out_of_order;
        m.anomalies = replay.anomalies().total();
        break;
      }
      absl::StatusOr<gpumem::report::TraceReplay> replay = gpumem::report::ReplayTrace(path);
      m.seconds = Seconds(start);
      if (!replay.ok()) {
        fprintf(stderr, "analyzer_throughput: %s\n",
                std::string(replay.status().message()).c_str());
        return m;
      }
      m.events = replay->memory_events + replay->file->launch_event_count();
      m.out_of_order = replay->out_of_order_events;
      m.anomalies = replay->anomalies.total();
      break;
    }
    case Mode::kReadOnly: {
      absl::StatusOr<gpumem::report::StreamedTrace> streamed =
          gpumem::report::ForEachMemoryEventBySeq(
              path, [](const gpumem::MemoryEvent&) {}, g_window);
      m.seconds = Seconds(start);
      if (!streamed.ok()) return m;
      m.events = streamed->stats.events + streamed->file->launch_event_count();
      m.reordered = streamed->stats.reordered;
      m.out_of_order = streamed->stats.out_of_order;
      break;
    }
    case Mode::kInMemory: {
      absl::StatusOr<gpumem::report::SortedTrace> sorted =
          gpumem::report::ReadMemoryEventsBySeq(path);
      if (!sorted.ok()) return m;
      gpumem::report::Replay replay;
      for (const gpumem::MemoryEvent& event : sorted->events) replay.Add(event);
      const std::vector<gpumem::report::PlaceUsage> places = replay.Places();
      m.seconds = Seconds(start);
      m.events = sorted->events.size();
      m.anomalies = replay.anomalies().total();
      break;
    }
  }
  m.peak_rss_kib = PeakRssKiB();
  m.ok = true;
  return m;
}

// Runs `work` in a child process (so that its ru_maxrss is its own) and waits for it.
template <typename Work>
bool InChild(Work&& work) {
  fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    const bool ok = work();
    fflush(stdout);
    fflush(stderr);
    _exit(ok ? 0 : 1);  // not exit(): the parent's cleanup is the parent's
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The child's measurement comes back through a pipe.
bool MeasureInChild(const std::string& path, Mode mode, Measurement* out) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  const bool ok = InChild([&] {
    close(fds[0]);
    const Measurement m = Analyze(path, mode);
    const bool written = write(fds[1], &m, sizeof(m)) == static_cast<ssize_t>(sizeof(m));
    return m.ok && written;
  });
  close(fds[1]);
  const bool got = read(fds[0], out, sizeof(*out)) == static_cast<ssize_t>(sizeof(*out));
  close(fds[0]);
  return ok && got;
}

std::string Mib(double bytes) {
  char text[32];
  snprintf(text, sizeof(text), "%.1f MiB", bytes / (1 << 20));
  return text;
}

void PrintRow(const char* what, uint64_t file_bytes, const Measurement& m) {
  printf("  %-24s %6.2f s  %6.2f M events/s  %6.0f MiB/s  peak RSS %9s", what, m.seconds,
         static_cast<double>(m.events) / m.seconds / 1e6,
         static_cast<double>(file_bytes) / m.seconds / (1 << 20),
         Mib(static_cast<double>(m.peak_rss_kib) * 1024).c_str());
  if (m.reordered > 0) {
    printf("  put back in seq order %llu", static_cast<unsigned long long>(m.reordered));
  }
  if (m.out_of_order > 0) {
    printf("  beyond the window %llu", static_cast<unsigned long long>(m.out_of_order));
  }
  if (m.anomalies > 0) printf("  anomalies %llu", static_cast<unsigned long long>(m.anomalies));
  printf("\n");
}

std::string CpuModel() {
  FILE* cpuinfo = fopen("/proc/cpuinfo", "r");
  if (cpuinfo == nullptr) return "unknown CPU";
  char line[512];
  std::string model = "unknown CPU";
  while (fgets(line, sizeof(line), cpuinfo) != nullptr) {
    if (strncmp(line, "model name", 10) == 0 && strchr(line, ':') != nullptr) {
      model = strchr(line, ':') + 2;
      if (!model.empty() && model.back() == '\n') model.pop_back();
      break;
    }
  }
  fclose(cpuinfo);
  return model;
}

// `gpumem report` as a user runs it (--gpumem): the commands timed, each on its own after the
// replay rows.
const char* g_gpumem = nullptr;
Measurement g_report;  // the first command (`gpumem report`) on the last trace
const std::vector<std::vector<std::string>> kReportCommands = {{"report"}, {"report", "--summary"}};

// Starts `g_gpumem ARGS path` with its output to /dev/null: its pid, or -1.
pid_t StartCommand(const std::vector<std::string>& args, const std::string& path) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  const int null = open("/dev/null", O_WRONLY);
  if (null >= 0) dup2(null, STDOUT_FILENO);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(g_gpumem));
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(const_cast<char*>(path.c_str()));
  argv.push_back(nullptr);
  execv(g_gpumem, argv.data());
  _exit(127);
}

// `gpumem report` exits 0, or 1 when it found leaks (the generated traces end with some live).
bool CommandSucceeded(int status) { return WIFEXITED(status) && WEXITSTATUS(status) <= 1; }

// Runs `g_gpumem ARGS path` (output to /dev/null) `runs` times and keeps the fastest wall time
// and the largest peak RSS (wait4's rusage). False when it fails.
bool MeasureCommand(const std::vector<std::string>& args, const std::string& path, int runs,
                    uint64_t events, Measurement* out) {
  for (int run = 0; run < runs; ++run) {
    const auto start = std::chrono::steady_clock::now();
    const pid_t pid = StartCommand(args, path);
    if (pid < 0) return false;
    int status = 0;
    struct rusage usage {};
    while (wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
    }
    const double seconds = Seconds(start);
    if (!CommandSucceeded(status)) return false;
    if (run == 0 || seconds < out->seconds) out->seconds = seconds;
    out->peak_rss_kib =
        std::max<uint64_t>(out->peak_rss_kib, static_cast<uint64_t>(usage.ru_maxrss));
  }
  out->events = events;
  out->ok = true;
  return true;
}

// Times the analyzer on `path`: the read alone once, ReplayTrace `runs` times (the fastest run
// counts; RSS is the largest), and the in-memory path when `compare`. False on a read error.
bool MeasureTrace(const std::string& path, int runs, bool compare, Measurement* replay) {
  struct stat info {};
  stat(path.c_str(), &info);
  const uint64_t file_bytes = static_cast<uint64_t>(info.st_size);
  Measurement read_only;
  if (!MeasureInChild(path, Mode::kReadOnly, &read_only)) return false;
  PrintRow("read + reorder only", file_bytes, read_only);
  for (int run = 0; run < runs; ++run) {
    Measurement m;
    if (!MeasureInChild(path, Mode::kReplay, &m)) return false;
    if (run == 0 || m.seconds < replay->seconds) {
      const uint64_t rss = std::max(m.peak_rss_kib, run == 0 ? 0 : replay->peak_rss_kib);
      *replay = m;
      replay->peak_rss_kib = rss;
    } else {
      replay->peak_rss_kib = std::max(replay->peak_rss_kib, m.peak_rss_kib);
    }
  }
  PrintRow(runs > 1 ? "ReplayTrace (fastest)" : "ReplayTrace", file_bytes, *replay);
  if (g_gpumem != nullptr) {
    for (const std::vector<std::string>& args : kReportCommands) {
      Measurement command;
      std::string name = "gpumem";
      for (const std::string& arg : args) name += " " + arg;
      if (!MeasureCommand(args, path, runs, replay->events, &command)) {
        fprintf(stderr, "analyzer_throughput: %s %s failed\n", name.c_str(), path.c_str());
        return false;
      }
      PrintRow(name.c_str(), file_bytes, command);
      if (&args == &kReportCommands.front()) g_report = command;
    }
  }
  Measurement in_memory;
  if (compare && MeasureInChild(path, Mode::kInMemory, &in_memory)) {
    PrintRow("in memory (old path)", file_bytes, in_memory);
  }
  return true;
}

void Usage() {
  fprintf(
      stderr,
      "usage: analyzer_throughput [EVENTS] [--runs R] [--window W] [--compare] [--gpumem BINARY]\n"
      "       analyzer_throughput --trace FILE [--runs R] [--window W] [--compare] [--gpumem B]\n"
      "       analyzer_throughput EVENTS --generate FILE   (record a trace and keep it)\n"
      "  EVENTS: 10 to %llu (default %llu); the trace is recorded under $TMPDIR (or /tmp)\n"
      "  and deleted. --runs: ReplayTrace runs per trace, the fastest counts (default 3).\n"
      "  --compare: also time the in-memory path (ReadMemoryEventsBySeq + Replay) on the\n"
      "  smaller trace. --trace: time an existing trace instead (not deleted). --window: the\n"
      "  reorder window, in events (default that of ReplayTrace(), 65536). --gpumem BINARY:\n"
      "  also time `gpumem report` and `gpumem report --summary` on each trace, recorded\n"
      "  traces first symbolized as `gpumem record` leaves them (a --trace FILE is timed as it\n"
      "  is: symbolize it first to time what a user has).\n"
      "  --ranks N (with --gpumem): N traces of varied lengths in a directory, the largest\n"
      "  --rank-events (default 2000000): `gpumem report DIR` against its largest trace alone\n"
      "  and against as many independent `gpumem report TRACE` processes at once as cores.\n"
      "  --only-ranks: that alone, without the EVENTS traces.\n"
      "  --random-addresses: traces of random buffers that never repeat an event, instead of\n"
      "  a training loop.\n"
      "  --launches: the training loop launches a kernel after each allocation (events count\n"
      "  memory events and launches alike).\n",
      static_cast<unsigned long long>(kMaxEvents), static_cast<unsigned long long>(kDefaultEvents));
}

struct Options {
  uint64_t events = kDefaultEvents;
  int ranks = 0;                     // --ranks: rank traces for `gpumem report DIR`
  uint64_t rank_events = 2'000'000;  // --rank-events: the largest rank trace
  bool only_ranks = false;           // --only-ranks: no EVENTS traces
  bool compare = false;
  int runs = 3;
  std::string trace;
  std::string generate;
};

// False, having printed the usage, on an argument it does not take.
bool ParseOptions(int argc, char** argv, Options* options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--compare") {
      options->compare = true;
    } else if (arg == "--runs" && i + 1 < argc) {
      options->runs = atoi(argv[++i]);
      if (options->runs < 1 || options->runs > 100) {
        Usage();
        return false;
      }
    } else if (arg == "--window" && i + 1 < argc) {
      g_window = strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--trace" && i + 1 < argc) {
      options->trace = argv[++i];
    } else if (arg == "--gpumem" && i + 1 < argc) {
      g_gpumem = argv[++i];
    } else if (arg == "--ranks" && i + 1 < argc) {
      options->ranks = atoi(argv[++i]);
    } else if (arg == "--rank-events" && i + 1 < argc) {
      options->rank_events = strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--only-ranks") {
      options->only_ranks = true;
    } else if (arg == "--random-addresses") {
      g_random_addresses = true;
    } else if (arg == "--launches") {
      g_launches = true;
    } else if (arg == "--generate" && i + 1 < argc) {
      options->generate = argv[++i];
    } else {
      char* end = nullptr;
      options->events = strtoull(argv[i], &end, 10);
      if (end == argv[i] || *end != '\0' || options->events < 10 || options->events > kMaxEvents) {
        Usage();
        return false;
      }
    }
  }
  return true;
}

// g_dir under $TMPDIR (or /tmp), removed at exit or on a signal, and g_trace in it; false, having
// said why, when there is not room for a trace of `events` or no directory could be made.
bool MakeBenchDirectory(uint64_t events) {
  const char* tmp = getenv("TMPDIR");
  const std::string tmp_dir = tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp";
  struct statvfs space {};
  const uint64_t needed = events * kBytesPerEventEstimate + (uint64_t{2} << 30);
  if (statvfs(tmp_dir.c_str(), &space) != 0 ||
      static_cast<uint64_t>(space.f_bavail) * space.f_frsize < needed) {
    fprintf(stderr, "analyzer_throughput: %s needs %s free for a trace of %llu events\n",
            tmp_dir.c_str(), Mib(static_cast<double>(needed)).c_str(),
            static_cast<unsigned long long>(events));
    return false;
  }
  snprintf(g_dir, sizeof(g_dir), "%s/gpumem-analyzer-bench-XXXXXX", tmp_dir.c_str());
  if (mkdtemp(g_dir) == nullptr) {
    fprintf(stderr, "analyzer_throughput: mkdtemp in %s: %s\n", tmp_dir.c_str(), strerror(errno));
    return false;
  }
  atexit(RemoveFiles);
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  snprintf(g_trace, sizeof(g_trace), "%s/bench.trace", g_dir);
  return true;
}

// Records a trace of `n` events at `path`, times it and deletes it; false, having said why, when
// recording or reading failed.
bool RecordAndMeasure(const std::string& path, uint64_t n, int runs, bool compare,
                      Measurement* replay) {
  const auto start = std::chrono::steady_clock::now();
  if (!InChild([&] { return Generate(path, n) == 0; })) {
    fprintf(stderr, "analyzer_throughput: recording the trace failed\n");
    return false;
  }
  struct stat info {};
  stat(path.c_str(), &info);
  const uint64_t file_bytes = static_cast<uint64_t>(info.st_size);
  printf("trace of %llu events: %s, %.1f bytes/event, recorded in %.1f s\n",
         static_cast<unsigned long long>(n), Mib(static_cast<double>(file_bytes)).c_str(),
         static_cast<double>(file_bytes) / static_cast<double>(n), Seconds(start));
  // Symbolized as `gpumem record` leaves a trace at exit, so that `gpumem report` is timed on what
  // a user has: unsymbolized, each report would also read the debug information of the recording
  // binary's libraries (tens of milliseconds with a C library's compressed debug file installed).
  Measurement symbolized;
  if (g_gpumem != nullptr && !MeasureCommand({"symbolize"}, path, 1, 0, &symbolized)) {
    fprintf(stderr, "analyzer_throughput: gpumem symbolize %s failed\n", path.c_str());
    unlink(path.c_str());
    return false;
  }
  const bool measured = MeasureTrace(path, runs, compare, replay);
  unlink(path.c_str());
  if (!measured) fprintf(stderr, "analyzer_throughput: reading the trace failed\n");
  return measured;
}

// The rate on the large trace, and how peak memory grew from the small one to it.
void PrintResult(const Measurement& small, const Measurement& large,
                 const Measurement& report_small, const Measurement& report_large) {
  const double rate = static_cast<double>(large.events) / large.seconds;
  printf(
      "result: %.2f M events/s on %llu events (target >= 10 M/s: %s); peak RSS %s at %llu "
      "events, %s at %llu (ratio %.2f)\n",
      rate / 1e6, static_cast<unsigned long long>(large.events), rate >= 10e6 ? "met" : "NOT met",
      Mib(static_cast<double>(large.peak_rss_kib) * 1024).c_str(),
      static_cast<unsigned long long>(large.events),
      Mib(static_cast<double>(small.peak_rss_kib) * 1024).c_str(),
      static_cast<unsigned long long>(small.events),
      static_cast<double>(large.peak_rss_kib) / static_cast<double>(small.peak_rss_kib));
  printf(
      "  (bounded either way: the reorder buffer holds a handful of events, and grows towards its "
      "window of %zu events, %s, only while an event that came far out of order is awaited)\n",
      g_window,
      Mib(static_cast<double>(g_window) * sizeof(gpumem::report::MemoryEventFields)).c_str());
  if (g_gpumem != nullptr) {
    printf(
        "result: `gpumem report` (replay, peak, leaks, kernels) %.2f M events/s on %llu events, "
        "%.2f on %llu; peak RSS %s and %s (ratio %.2f)\n",
        static_cast<double>(report_large.events) / report_large.seconds / 1e6,
        static_cast<unsigned long long>(report_large.events),
        static_cast<double>(report_small.events) / report_small.seconds / 1e6,
        static_cast<unsigned long long>(report_small.events),
        Mib(static_cast<double>(report_large.peak_rss_kib) * 1024).c_str(),
        Mib(static_cast<double>(report_small.peak_rss_kib) * 1024).c_str(),
        static_cast<double>(report_large.peak_rss_kib) /
            static_cast<double>(report_small.peak_rss_kib));
  }
}

// ---- rank traces: `gpumem report DIR` ----

// The lengths of `ranks` traces: one (not the first by name) `largest` events, the others spread
// over a quarter of it to all of it.
std::vector<uint64_t> RankLengths(int ranks, uint64_t largest) {
  std::mt19937_64 random(99);
  std::vector<uint64_t> lengths;
  for (int rank = 0; rank < ranks; ++rank) {
    lengths.push_back(largest / 4 + random() % (largest - largest / 4 + 1));
  }
  lengths[static_cast<size_t>(ranks) / 3] = largest;
  return lengths;
}

// The rank traces of one run, recorded into g_ranks.
struct RankTraces {
  std::vector<std::string> paths;  // by name, as `gpumem report DIR` takes them
  std::vector<uint64_t> events;    // of each
  uint64_t total_events = 0;
  uint64_t total_bytes = 0;
  size_t largest = 0;  // the index of the (first) largest
};

// Records `ranks` traces, the largest `largest` events, into g_ranks, and symbolizes them as
// `gpumem record` leaves them (no report then reads a binary). False, having said why, on a
// failure.
bool RecordRanks(int ranks, uint64_t largest, RankTraces* traces) {
  snprintf(g_ranks, sizeof(g_ranks), "%s/ranks", g_dir);
  if (mkdir(g_ranks, 0700) != 0) {
    fprintf(stderr, "analyzer_throughput: mkdir %s: %s\n", g_ranks, strerror(errno));
    return false;
  }
  const auto start = std::chrono::steady_clock::now();
  traces->events = RankLengths(ranks, largest);
  for (int rank = 0; rank < ranks; ++rank) {
    char path[400];
    snprintf(path, sizeof(path), "%s/rank-%02d.trace", g_ranks, rank);
    const uint64_t events = traces->events[static_cast<size_t>(rank)];
    if (!InChild([&] { return Generate(path, events) == 0; })) {
      fprintf(stderr, "analyzer_throughput: recording %s failed\n", path);
      return false;
    }
    struct stat info {};
    stat(path, &info);
    traces->total_events += events;
    traces->total_bytes += static_cast<uint64_t>(info.st_size);
    if (events > traces->events[traces->largest]) traces->largest = traces->paths.size();
    traces->paths.push_back(path);
  }
  Measurement symbolized;
  if (!MeasureCommand({"symbolize"}, g_ranks, 1, 0, &symbolized)) {
    fprintf(stderr, "analyzer_throughput: gpumem symbolize %s failed\n", g_ranks);
    return false;
  }
  printf(
      "%d rank traces, %llu events in all (%llu to %llu each), recorded and symbolized in %.1f s\n",
      ranks, static_cast<unsigned long long>(traces->total_events),
      static_cast<unsigned long long>(
          *std::min_element(traces->events.begin(), traces->events.end())),
      static_cast<unsigned long long>(largest), Seconds(start));
  return true;
}

// One run of the control: `paths`, each reported by a `gpumem report` process of its own, `jobs`
// processes at once (the next starts as one ends). Its wall time, and the largest peak RSS of one
// process. False when a process failed.
bool RunIndependent(const std::vector<std::string>& paths, unsigned jobs, Measurement* out) {
  const auto start = std::chrono::steady_clock::now();
  size_t next = 0;
  unsigned running = 0;
  bool ok = true;
  while (next < paths.size() || running > 0) {
    for (; running < jobs && next < paths.size(); ++next) {
      if (StartCommand({"report"}, paths[next]) < 0) {
        ok = false;
        next = paths.size();  // start no more; wait for those running
        break;
      }
      ++running;
    }
    if (running == 0) break;
    int status = 0;
    struct rusage usage {};
    if (wait4(-1, &status, 0, &usage) < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    --running;
    ok = ok && CommandSucceeded(status);
    out->peak_rss_kib =
        std::max<uint64_t>(out->peak_rss_kib, static_cast<uint64_t>(usage.ru_maxrss));
  }
  out->seconds = Seconds(start);
  return ok;
}

// The control for `gpumem report DIR`: the same traces analysed by independent `gpumem report`
// processes, `jobs` at once, started largest first as report DIR starts them. They share nothing
// but the machine (memory bandwidth, caches, hyperthreads, turbo), so this is the machine's own
// ceiling, and report DIR's time against it is what its one process adds. The fastest of `runs`.
bool MeasureIndependent(const RankTraces& traces, unsigned jobs, int runs, Measurement* out) {
  std::vector<std::string> largest_first;
  for (size_t i : gpumem::report::LargestFirst(traces.events)) {
    largest_first.push_back(traces.paths[i]);
  }
  for (int run = 0; run < runs; ++run) {
    Measurement m;
    if (!RunIndependent(largest_first, jobs, &m)) return false;
    if (run == 0 || m.seconds < out->seconds) out->seconds = m.seconds;
    out->peak_rss_kib = std::max(out->peak_rss_kib, m.peak_rss_kib);
  }
  out->events = traces.total_events;
  out->ok = true;
  return true;
}

// Times `gpumem report DIR` (as many jobs as cores) on `traces` against `gpumem report` of the
// largest alone and against the control (MeasureIndependent). False, having said why, on a
// failure.
bool TimeRanks(const RankTraces& traces, int runs) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::string& largest_path = traces.paths[traces.largest];
  const uint64_t largest = traces.events[traces.largest];
  struct stat info {};
  stat(largest_path.c_str(), &info);
  Measurement one;
  Measurement all;
  Measurement control;
  if (!MeasureCommand({"report"}, largest_path, runs, largest, &one) ||
      !MeasureCommand({"report", "--jobs", std::to_string(cores)}, g_ranks, runs,
                      traces.total_events, &all) ||
      !MeasureIndependent(traces, cores, runs, &control)) {
    fprintf(stderr, "analyzer_throughput: gpumem report failed\n");
    return false;
  }
  PrintRow("gpumem report LARGEST", static_cast<uint64_t>(info.st_size), one);
  PrintRow("gpumem report DIR", traces.total_bytes, all);
  PrintRow("control: processes", traces.total_bytes, control);
  const size_t ranks = traces.paths.size();
  const double rounds = std::ceil(static_cast<double>(ranks) / cores);
  printf(
      "result: `gpumem report DIR` (--jobs %u) %.2f s: %.2f x the control, %u independent `gpumem "
      "report TRACE` processes at once, largest first (%.2f s: the machine's own ceiling); %.2f x "
      "ceil(%zu/%u) x the largest trace alone (%.2f s x %.0f = %.2f s)\n",
      cores, all.seconds, all.seconds / control.seconds, cores, control.seconds,
      all.seconds / (rounds * one.seconds), ranks, cores, one.seconds, rounds,
      rounds * one.seconds);
  return true;
}

// Records the rank traces into g_ranks, times them (TimeRanks) and deletes them. False, having
// said why, on a failure.
bool MeasureRanks(int ranks, uint64_t largest, int runs) {
  RankTraces traces;
  const bool measured = RecordRanks(ranks, largest, &traces) && TimeRanks(traces, runs);
  std::error_code ignored;
  std::filesystem::remove_all(g_ranks, ignored);
  g_ranks[0] = '\0';
  return measured;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!ParseOptions(argc, argv, &options)) return 2;
  printf(
      "analyzer_throughput: ReplayTrace() on one thread (streaming, reorder window %zu events), "
      "%s\n",
      g_window, CpuModel().c_str());
  if (!options.generate.empty()) {  // a trace to keep, for profiling the analyzer on its own
    return InChild([&] { return Generate(options.generate, options.events) == 0; }) ? 0 : 1;
  }
  if (!options.trace.empty()) {
    printf("trace %s\n", options.trace.c_str());
    Measurement replay;
    return MeasureTrace(options.trace, options.runs, options.compare, &replay) ? 0 : 1;
  }

  const uint64_t rank_space = static_cast<uint64_t>(options.ranks) * options.rank_events;
  if (!MakeBenchDirectory(options.only_ranks ? rank_space : options.events + rank_space)) {
    return 2;
  }
  if (options.ranks > 0 && g_gpumem == nullptr) {
    fprintf(stderr, "analyzer_throughput: --ranks needs --gpumem\n");
    return 2;
  }
  if (options.only_ranks) {
    return MeasureRanks(options.ranks, options.rank_events, options.runs) ? 0 : 1;
  }
  const std::string path = g_trace;
  printf("traces recorded by gpumem's recorder: %d threads, ~%zu live buffers, %d stacks, %s\n",
         kThreads, kThreads * kLivePerThread, kStacks,
         g_random_addresses ? "random buffers" : "a training loop");
  const uint64_t small_events = options.events / 10;
  Measurement small;
  Measurement large;
  if (!RecordAndMeasure(path, small_events, options.runs, options.compare, &small)) return 1;
  const Measurement report_small = g_report;
  if (!RecordAndMeasure(path, options.events, options.runs, false, &large)) return 1;
  PrintResult(small, large, report_small, g_report);
  if (options.ranks > 0 && !MeasureRanks(options.ranks, options.rank_events, options.runs)) {
    return 1;
  }
  return 0;
}
