#include "report/cli/worker_processes.h"

#include <poll.h>
#include <signal.h>
#include <stdio_ext.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpumem::report {
namespace {

// A worker's result on its socket: a header (the byte count, then the descriptor count, 8 bytes
// each, little-endian), carrying the first descriptors; one byte more for each further group of
// descriptors; then the bytes. The kernel hands at most SCM_MAX_FD (253) descriptors over with
// one message.
constexpr size_t kHeaderBytes = 16;
constexpr size_t kDescriptorsPerMessage = 250;

void PutU64(uint64_t value, char* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(value >> (8 * i));
}

uint64_t GetU64(const char* in) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
  return value;
}

size_t DescriptorGroups(size_t descriptors) {
  return descriptors == 0 ? 1 : (descriptors + kDescriptorsPerMessage - 1) / kDescriptorsPerMessage;
}

// Sends `size` bytes with `count` descriptors attached to the first of them; false on failure.
bool SendWithDescriptors(int socket, const char* bytes, size_t size, const int* descriptors,
                         size_t count) {
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kDescriptorsPerMessage)] = {};
  iovec io = {const_cast<char*>(bytes), size};
  msghdr message = {};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  if (count > 0) {
    message.msg_control = control;
    message.msg_controllen = CMSG_SPACE(sizeof(int) * count);
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int) * count);
    std::memcpy(CMSG_DATA(header), descriptors, sizeof(int) * count);
  }
  ssize_t sent;
  do {
    sent = sendmsg(socket, &message, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) return false;
  // The descriptors went with the first byte; the rest of a short send goes plainly.
  for (size_t done = static_cast<size_t>(sent); done < size;) {
    const ssize_t more = send(socket, bytes + done, size - done, MSG_NOSIGNAL);
    if (more < 0 && errno == EINTR) continue;
    if (more <= 0) return false;
    done += static_cast<size_t>(more);
  }
  return true;
}

bool SendResult(int socket, const WorkerResult& result) {
  char header[kHeaderBytes];
  PutU64(result.bytes.size(), header);
  PutU64(result.descriptors.size(), header + 8);
  const size_t count = result.descriptors.size();
  const int* descriptors = result.descriptors.data();
  const size_t first = std::min(count, kDescriptorsPerMessage);
  if (!SendWithDescriptors(socket, header, kHeaderBytes, descriptors, first)) return false;
  for (size_t sent = first; sent < count; sent += kDescriptorsPerMessage) {
    const char marker = 0;
    if (!SendWithDescriptors(socket, &marker, 1, descriptors + sent,
                             std::min(count - sent, kDescriptorsPerMessage))) {
      return false;
    }
  }
  return SendWithDescriptors(socket, result.bytes.data(), result.bytes.size(), nullptr, 0);
}

// The worker: runs item `item` and sends its result. Never returns.
[[noreturn]] void RunWorker(size_t item, int socket, pid_t parent,
                            const std::function<WorkerResult(size_t)>& work) {
  // The parent's unwritten output is the parent's to write: exiting must not write it twice.
  __fpurge(stdout);
  __fpurge(stderr);
  // A worker whose parent is gone has nobody to report to.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  WorkerResult result = work(item);
  const bool sent = SendResult(socket, result);
  // The parent sees the end of the result now, not once this process's memory is torn down.
  close(socket);
  _exit(sent ? 0 : 1);
}

// How a worker that handed back no whole result ended.
std::string HowItEnded(int status) {
  if (WIFSIGNALED(status)) {
    const char* name = strsignal(WTERMSIG(status));
    return absl::StrCat("its analysis ended by signal ", WTERMSIG(status),
                        name != nullptr ? absl::StrCat(" (", name, ")") : "");
  }
  if (WIFEXITED(status)) {
    return absl::StrCat("its analysis ended with exit status ", WEXITSTATUS(status),
                        " before handing back a result");
  }
  return "its analysis ended before handing back a result";
}

// A worker as the parent sees it: what came so far on its socket.
struct Running {
  size_t item = 0;
  pid_t pid = -1;
  int socket = -1;
  std::string received;
  WorkerResult result;  // its descriptors, as they come
};

// Reads what `worker` has sent; false once its socket is at its end (or failed).
bool Receive(Running* worker) {
  char buffer[1 << 16];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 253)];
  iovec io = {buffer, sizeof(buffer)};
  msghdr message = {};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  ssize_t got;
  do {
    got = recvmsg(worker->socket, &message, MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); got >= 0 && header != nullptr;
       header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const size_t at = worker->result.descriptors.size();
    worker->result.descriptors.resize(at + count);
    std::memcpy(worker->result.descriptors.data() + at, CMSG_DATA(header), sizeof(int) * count);
  }
  if (got <= 0) return false;
  worker->received.append(buffer, static_cast<size_t>(got));
  return true;
}

// Whether `received` (with `descriptors` received) is a whole result; its bytes into *bytes.
bool WholeResult(const std::string& received, size_t descriptors, std::string* bytes) {
  if (received.size() < kHeaderBytes) return false;
  const uint64_t size = GetU64(received.data());
  const uint64_t expected_descriptors = GetU64(received.data() + 8);
  const uint64_t markers = DescriptorGroups(expected_descriptors) - 1;
  if (received.size() != kHeaderBytes + markers + size || descriptors != expected_descriptors) {
    return false;
  }
  *bytes = received.substr(kHeaderBytes + markers);
  return true;
}

// Waits for worker `pid` to end; its status.
int Reap(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// Reaps those of `pids` that have ended, without waiting; leaves the others.
void ReapEnded(std::vector<pid_t>* pids) {
  std::erase_if(*pids, [](pid_t pid) {
    int status;
    return waitpid(pid, &status, WNOHANG) != 0;
  });
}

// The result `worker` handed back, now that its socket is at its end, or why there is none. A
// whole result is taken without waiting for the worker to end (it tears its memory down
// meanwhile): its pid goes to *unreaped.
absl::StatusOr<WorkerResult> Finish(Running* worker, std::vector<pid_t>* unreaped) {
  close(worker->socket);
  WorkerResult result = std::move(worker->result);
  if (WholeResult(worker->received, result.descriptors.size(), &result.bytes)) {
    unreaped->push_back(worker->pid);
    return result;
  }
  const int status = Reap(worker->pid);
  CloseDescriptors(&result);
  return absl::InternalError(HowItEnded(status));
}

// Every result's descriptors stay open in this process until the caller is done with them (a
// timeline's spools, one file per place and trace): a directory of a few thousand traces would
// pass the usual soft limit of 1024 descriptors, which the hard limit lets any process raise.
void AllowAsManyDescriptorsAsPermitted() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace

void CloseDescriptors(WorkerResult* result) {
  for (int descriptor : result->descriptors) close(descriptor);
  result->descriptors.clear();
}

void RunInWorkers(size_t count, size_t jobs, const std::function<WorkerResult(size_t)>& work,
                  const std::function<void(size_t, absl::StatusOr<WorkerResult>)>& deliver,
                  const std::vector<size_t>& start_order) {
  AllowAsManyDescriptorsAsPermitted();
  jobs = JobCount(jobs, count);
  if (jobs <= 1) {
    for (size_t i = 0; i < count; ++i) deliver(i, work(i));
    return;
  }
  std::vector<std::optional<absl::StatusOr<WorkerResult>>> done(count);
  std::vector<Running> running;
  std::vector<pid_t> unreaped;  // workers that handed back a whole result
  size_t started = 0;
  size_t delivered = 0;
  const pid_t parent = getpid();
  // Starts the next item in a worker; where none can be forked and none runs, in this process.
  const auto start_next = [&] {
    const size_t item = start_order.empty() ? started : start_order[started];
    int sockets[2];
    pid_t pid = -1;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) == 0) {
      pid = fork();
      if (pid == 0) {
        close(sockets[0]);
        for (const Running& other : running) close(other.socket);
        RunWorker(item, sockets[1], parent, work);
      }
      close(sockets[1]);
      if (pid < 0) close(sockets[0]);
    }
    if (pid < 0) {
      if (!running.empty()) return false;  // wait for one to end, and try again
      done[item].emplace(work(item));
    } else {
      running.push_back({item, pid, sockets[0], {}, {}});
    }
    ++started;
    return true;
  };
  while (delivered < count) {
    while (started < count && running.size() < jobs && start_next()) {
    }
    for (; delivered < count && done[delivered].has_value(); ++delivered) {
      deliver(delivered, std::move(*done[delivered]));
      done[delivered].reset();
    }
    if (running.empty()) continue;
    std::vector<pollfd> sockets;
    for (const Running& worker : running) sockets.push_back({worker.socket, POLLIN, 0});
    if (poll(sockets.data(), sockets.size(), -1) < 0) continue;  // EINTR: poll again
    for (size_t w = running.size(); w-- > 0;) {
      if (sockets[w].revents == 0 || Receive(&running[w])) continue;
      done[running[w].item].emplace(Finish(&running[w], &unreaped));
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(w));
    }
    // Those that have ended meanwhile: thousands of traces leave no thousands of zombies.
    ReapEnded(&unreaped);
  }
  // Workers still tearing their memory down are reaped by a thread of their own, so that the
  // caller goes on meanwhile (the combined view's merge, say).
  ReapEnded(&unreaped);
  if (unreaped.empty()) return;
  try {
    std::thread([unreaped] {
      for (const pid_t pid : unreaped) Reap(pid);
    }).detach();
  } catch (const std::system_error&) {  // no thread to be had: wait here
    for (const pid_t pid : unreaped) Reap(pid);
  }
}

}  // namespace gpumem::report
