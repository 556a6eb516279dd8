// Settings of the in-process recorder, read once from GPUMEM_* environment variables at start-up.
// The README lists every variable; the trace header records the values in force.
#pragma once

#include <cstddef>

namespace gpumem {

struct RecorderOptions {
  bool enabled = true;             // GPUMEM_ENABLE=0 turns every hook into a plain pass-through
  char output[4096] = {};          // GPUMEM_OUTPUT: a file, or an existing directory; "" = default
  int stack_depth = 64;            // GPUMEM_STACK_DEPTH: native frames kept per stack (0 = none)
  bool free_stacks = false;        // GPUMEM_FREE_STACKS=1: capture stacks on frees too
  char libunwind_path[4096] = {};  // GPUMEM_LIBUNWIND: explicit path of libunwind.so.8
  bool fast_unwind = true;      // GPUMEM_FAST_UNWIND=0: every stack through libunwind (A/B, doubt)
  bool launches = true;         // GPUMEM_LAUNCHES=0: kernel launches are not recorded
  bool launch_stacks = true;    // GPUMEM_LAUNCH_STACKS=0: launches are recorded without stacks
  int launch_stack_depth = 24;  // GPUMEM_LAUNCH_STACK_DEPTH: frames kept per launch stack
  bool cupti = true;            // GPUMEM_CUPTI=0: no CUPTI subscriber (interposition only)
  bool kernel_times = false;    // GPUMEM_KERNEL_TIMES=1: GPU start/end of every kernel (CUPTI)
  bool cupti_launches = false;  // GPUMEM_CUPTI_LAUNCHES=1: CUPTI callbacks on launches too
  // GPUMEM_CUPTI_POOLS=1: CUPTI memory-pool activity records too. Off by default: with them on,
  // every kernel launch costs ~0.8 µs more (H100), and the pools' attributes say the same.
  bool cupti_pools = false;
  // GPUMEM_CUPTI_CATCH_ALL=1: CUPTI's memory callbacks stay on for the whole run (by default they
  // are turned off once 1000 memory calls showed that interposition sees them: cupti/subscriber.h).
  bool cupti_catch_all = false;
  char cupti_path[4096] = {};  // GPUMEM_CUPTI_LIB: explicit path of libcupti.so
  bool python_frames = true;   // GPUMEM_PYTHON_FRAMES=0: stacks without Python frames
  // GPUMEM_INTERPRETER_FRAMES=1: native stacks go on through the Python interpreter to main().
  // By default, where Python frames are recorded, a native stack ends at the interpreter's eval
  // loop: the Python frames say what the frames above it did, and unwinding them cost time.
  bool interpreter_frames = false;
  bool self_timing = false;  // GPUMEM_SELF_TIMING=1: gpumem's own time per phase, at exit
  // GPUMEM_TENSORS: set by `gpumem record --tensors` to what it changed to see every tensor
  // (each variable's value before, "(unset)" when it had none); "" when it changed nothing.
  char tensors[1024] = {};
  // The frameworks' allocator settings in force, as the header records them: they say which
  // allocator made the trace's allocations, and the native allocator's options for its model.
  char pytorch_alloc_conf[1024] = {};  // PYTORCH_CUDA_ALLOC_CONF
  char xla_allocator[64] = {};         // XLA_PYTHON_CLIENT_ALLOCATOR
  char tf_allocator[64] = {};          // TF_GPU_ALLOCATOR
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
