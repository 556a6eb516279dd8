// Settings of the in-process recorder, read once from GPUMEM_* environment variables at start-up.
// The README lists every variable; the trace header records the values in force.
#pragma once

#include <cstddef>

namespace gpumem {

// The recorder's settings. Each member but the distributed identity is set from its variable by
// core/option_table.h, which names and describes them all; the defaults here are the table's
// (tests/core/option_table_test.cc checks that).
struct RecorderOptions {
  // The switches and numbers first, the texts after them: what every event reads lies in one
  // cache line (in a framework each line gpumem reads is a likely miss at every event).
  bool enabled = true;
  bool free_stacks = false;
  bool fast_unwind = true;
  bool launches = true;
  bool launch_stacks = true;
  bool cupti = true;
  bool kernel_times = false;
  bool cupti_launches = false;
  bool cupti_pools = false;
  bool cupti_catch_all = false;
  bool python_frames = true;
  bool interpreter_frames = false;
  bool event_refs = true;
  bool self_timing = false;
  int stack_depth = 64;
  int launch_stack_depth = 24;
  int resync_events = 1 << 18;
  char output[4096] = {};  // "" = the default name
  char libunwind_path[4096] = {};
  char cupti_path[4096] = {};
  char tensors[1024] = {};
  char pytorch_alloc_conf[1024] = {};
  char xla_allocator[64] = {};
  char tf_allocator[64] = {};
  // The process's place in a distributed job (-1: not set), for the trace header: RANK,
  // LOCAL_RANK, WORLD_SIZE (torchrun), else Open MPI's OMPI_COMM_WORLD_{RANK,LOCAL_RANK,SIZE},
  // else Slurm's SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS.
  int rank = -1;
  int local_rank = -1;
  int world_size = -1;
};

inline constexpr int kMaxStackDepth = 256;

// Parses the environment. Never allocates; bad values fall back to defaults with a warning.
void LoadRecorderOptions(RecorderOptions* options);

// Writes one line "gpumem: warning: ..." to stderr with write(2) (safe inside any hook).
void Warn(const char* part1, const char* part2 = nullptr, const char* part3 = nullptr);

}  // namespace gpumem
