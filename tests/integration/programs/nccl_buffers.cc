// Allocates and frees buffers as NCCL does, through libnccl.so.2 of the tests (fake_nccl.cc):
//   nccl_buffers [peer] [keep] [double_release]
// Exit status 0 when every call did what the real driver does.
#include <cstring>

#include "tests/integration/programs/fake_nccl.h"

int main(int argc, char** argv) {
  bool peer = false, keep = false, double_release = false;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "peer") == 0) peer = true;
    if (strcmp(argv[i], "keep") == 0) keep = true;
    if (strcmp(argv[i], "double_release") == 0) double_release = true;
  }
  return fake_nccl_run(peer, keep, double_release);
}
