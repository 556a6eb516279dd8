// Kernel interning: what the recorder knows about each kernel function (CUfunction) it has seen
// launched — an id whose KernelName packet is in the trace, and where the kernel's parameters lie,
// so a launch can look through their values for device pointers.
//
// The driver is asked once per function (cuFuncGetName, cuFuncGetParamInfo); lookups afterwards
// are lock-free. Inserting takes a lock, writes the KernelName packet, then publishes the entry,
// so no launch can refer to an id whose packet is not yet in the file (as in core/stack_table.h).
// Functions are opaque pointers here: core/ does not include cuda.h.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/packet_sink.h"

namespace gpumem {

// The driver calls that describe a kernel, with CUresult as int and CUfunction / CUkernel as
// void*. Any may be null (an older driver): the name is then unknown, or the parameters are not
// scanned. libcudart 13 launches CUkernel handles (cuLibrary*), on which the cuFunc* queries
// answer CUDA_ERROR_INVALID_HANDLE: the cuKernel* ones are asked then.
struct KernelQueries {
  using GetName = int (*)(const char** name, void* function);
  using GetParamInfo = int (*)(void* function, size_t index, size_t* offset, size_t* size);
  GetName func_get_name = nullptr;
  GetParamInfo func_get_param_info = nullptr;
  GetName kernel_get_name = nullptr;
  GetParamInfo kernel_get_param_info = nullptr;
};

// A parameter at least one pointer wide: its index, offset in the parameter buffer and size.
struct PointerSizedParam {
  uint16_t index = 0;
  uint16_t offset = 0;
  uint16_t size = 0;
};

inline constexpr size_t kMaxScannedParams = 24;

struct KernelInfo {
  uint64_t id = 0;            // KernelName.id; 0: not interned (table full, packet not written)
  bool params_known = false;  // cuFuncGetParamInfo answered
  uint8_t param_count = 0;    // entries used in `params`
  PointerSizedParam params[kMaxScannedParams];
};

class KernelTable {
 public:
  bool Init();
  void Reset();  // a new trace file (child after fork): every kernel is written again

  // The entry of `function`, created on first sight (the driver asked, the KernelName packet
  // written; `name_hint` is used when the driver cannot name it, e.g. CUPTI's symbolName).
  // Never null once Init() succeeded, unless the table is full.
  const KernelInfo* Lookup(void* function, const char* name_hint, const KernelQueries& queries,
                           PacketSink& sink);

  // The entry of `function` if it has one (no lock, no driver call, little stack); else null.
  const KernelInfo* Find(uintptr_t function) const;

  uint64_t kernels_written() const { return next_id_.load(std::memory_order_relaxed) - 1; }

 private:
  struct Slot {
    std::atomic<uintptr_t> function;  // published last: the entry is complete when it is set
    KernelInfo info;
  };
  static constexpr size_t kSlots = size_t{1} << 14;
  static constexpr size_t kMaxEntries = kSlots / 4 * 3;

  Slot* slots_ = nullptr;
  std::atomic<uint64_t> next_id_{1};
  std::atomic_flag insert_lock_ = ATOMIC_FLAG_INIT;
};

}  // namespace gpumem
