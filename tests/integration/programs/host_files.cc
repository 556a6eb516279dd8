// Does to its own files what real programs do while they use CUDA: closes every descriptor it did
// not open (close_range, closefrom), dup2()s its own file over every other descriptor, or runs
// under a file size limit; then writes its own file, allocates and frees PAIRS times and exits
// with EXIT_STATUS. Under gpumem its file, output and exit status must be what they are without.
// plant=VICTIM plays another user instead: before the first CUDA call it puts a symbolic link to
// VICTIM where gpumem names this process's trace in the directory GPUMEM_OUTPUT.
//
//   host_files plain|close_range|closefrom|dup2|fsize=BYTES|plant=VICTIM OWN_FILE PAIRS EXIT_STATUS
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <string>

namespace {

bool AllocateAndFree(long pairs) {
  for (long pair = 0; pair < pairs; ++pair) {
    void* buffer = nullptr;
    if (cudaMalloc(&buffer, 4096) != cudaSuccess || cudaFree(buffer) != cudaSuccess) return false;
  }
  return true;
}

// Every open descriptor from 3 up but `own` now refers to `own`'s file.
void Dup2OverEveryDescriptor(int own) {
  for (int fd = 3; fd < 4096; ++fd) {
    if (fd != own && fcntl(fd, F_GETFD) != -1) dup2(own, fd);
  }
}

void WriteLine(int fd, const std::string& line) {
  if (write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) exit(10);
}

}  // namespace

// A link to `victim` at GPUMEM_OUTPUT/gpumem-<host>-<pid>.trace.
bool PlantLink(const char* victim) {
  const char* dir = getenv("GPUMEM_OUTPUT");
  char host[256] = {};
  if (dir == nullptr || gethostname(host, sizeof(host) - 1) != 0) return false;
  const std::string link =
      std::string(dir) + "/gpumem-" + host + "-" + std::to_string(getpid()) + ".trace";
  return symlink(victim, link.c_str()) == 0;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s MODE OWN_FILE PAIRS EXIT_STATUS\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const char* own_path = argv[2];
  const long pairs = atol(argv[3]);
  // Descriptors the test runner left open would shift the numbers: start from 0, 1, 2 only.
  close_range(3, ~0U, 0);
  if (mode.rfind("fsize=", 0) == 0) {
    const rlim_t bytes = strtoull(mode.c_str() + 6, nullptr, 10);
    const rlimit limit = {bytes, bytes};
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) return 11;
  }
  if (mode.rfind("plant=", 0) == 0 && !PlantLink(mode.c_str() + 6)) return 15;
  if (!AllocateAndFree(1)) return 12;  // gpumem opens its trace here
  if (mode == "close_range") close_range(3, ~0U, 0);
  if (mode == "closefrom") closefrom(3);
  const int own = open(own_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (own < 0) return 13;
  if (mode == "dup2") Dup2OverEveryDescriptor(own);
  WriteLine(own, "the program's own file, written before its allocations\n");
  if (!AllocateAndFree(pairs)) return 14;
  WriteLine(own, "and after " + std::to_string(pairs) + " of them\n");
  printf("%ld pairs allocated and freed\n", pairs + 1);
  return atoi(argv[4]);
}
