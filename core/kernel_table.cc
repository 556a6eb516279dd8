#include "core/kernel_table.h"

#include <string.h>
#include <sys/mman.h>

#include "core/hot_path.h"
#include "core/spin_lock.h"
#include "core/trace_ids.h"
#include "core/wire_writer.h"

namespace gpumem {
namespace {

constexpr int kCudaErrorInvalidValue = 1;
constexpr int kCudaErrorInvalidHandle = 400;

size_t SlotOf(uintptr_t function, size_t slots) {
  uint64_t hash = function * 0x9e3779b97f4a7c15ull;
  return static_cast<size_t>(hash >> 40) & (slots - 1);
}

// Asks the driver where the parameters lie; keeps those a pointer could be in (>= 8 bytes).
// `get_param_info` answers for this kind of handle (CUfunction or CUkernel).
void DescribeParams(void* function, KernelQueries::GetParamInfo get_param_info, KernelInfo* info) {
  if (get_param_info == nullptr) return;
  constexpr size_t kMaxParams = 1024;  // 32 KiB of parameters, one byte each at most
  for (size_t index = 0; index < kMaxParams; ++index) {
    size_t offset = 0;
    size_t size = 0;
    const int result = get_param_info(function, index, &offset, &size);
    if (result != 0) {
      // CUDA_ERROR_INVALID_VALUE: no parameter at `index`, the list is complete. Anything else
      // (not supported, no context): the layout stays unknown.
      info->params_known = result == kCudaErrorInvalidValue;
      return;
    }
    if (size < sizeof(uint64_t) || offset > UINT16_MAX || size > UINT16_MAX) continue;
    if (info->param_count == kMaxScannedParams) continue;  // the first ones are scanned
    info->params[info->param_count++] = {
        static_cast<uint16_t>(index), static_cast<uint16_t>(offset), static_cast<uint16_t>(size)};
  }
}

}  // namespace

bool KernelTable::Init() {
  if (slots_ != nullptr) return true;
  void* memory = mmap(nullptr, kSlots * sizeof(Slot), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED) return false;
  slots_ = static_cast<Slot*>(memory);
  return true;
}

void KernelTable::Reset() {
  insert_lock_.clear();
  next_id_.store(1);
  if (slots_ != nullptr) madvise(slots_, kSlots * sizeof(Slot), MADV_DONTNEED);
}

GPUMEM_HOT const KernelInfo* KernelTable::Find(uintptr_t function) const {
  if (slots_ == nullptr) return nullptr;
  for (size_t i = SlotOf(function, kSlots);; i = (i + 1) & (kSlots - 1)) {
    uintptr_t slot_function = slots_[i].function.load(std::memory_order_acquire);
    if (slot_function == function) return &slots_[i].info;
    if (slot_function == 0) return nullptr;
  }
}

GPUMEM_HOT const KernelInfo* KernelTable::Lookup(void* function, const char* name_hint,
                                                 const KernelQueries& queries, PacketSink& sink) {
  if (slots_ == nullptr || function == nullptr) return nullptr;
  const auto key = reinterpret_cast<uintptr_t>(function);
  if (const KernelInfo* info = Find(key)) return info;

  SpinGuard guard(insert_lock_);
  if (const KernelInfo* info = Find(key)) return info;  // another thread won the race
  uint64_t id = next_id_.load(std::memory_order_relaxed);
  if (id > kMaxEntries) return nullptr;

  KernelInfo info;
  // A CUfunction, or a CUkernel (what libcudart 13 launches): the cuFunc* queries tell which.
  const char* name = nullptr;
  int named = queries.func_get_name != nullptr ? queries.func_get_name(&name, function) : -1;
  bool is_kernel_handle = false;
  if (named == kCudaErrorInvalidHandle && queries.kernel_get_name != nullptr) {
    named = queries.kernel_get_name(&name, function);
    is_kernel_handle = named == 0;
  }
  if (named != 0 || name == nullptr) name = name_hint != nullptr ? name_hint : "";
  KernelQueries::GetParamInfo get_param_info =
      is_kernel_handle ? queries.kernel_get_param_info : queries.func_get_param_info;
  DescribeParams(function, get_param_info, &info);
  if (!info.params_known && !is_kernel_handle && queries.kernel_get_param_info != nullptr) {
    info = KernelInfo{};  // the name came from the hint; the handle may still be a CUkernel
    DescribeParams(function, queries.kernel_get_param_info, &info);
  }

  uint8_t buffer[4096 + 32];
  wire::Writer writer(buffer, sizeof(buffer));
  size_t packet = writer.BeginNested(proto::trace_field::kPacket);
  size_t kernel = writer.BeginNested(proto::packet_field::kKernelName);
  writer.Varint(proto::kernel_name_field::kId, id);
  // Template-heavy names run to kilobytes; the start says which kernel it is.
  writer.Bytes(proto::kernel_name_field::kName, name, strnlen(name, 4000));
  writer.EndNested(kernel);
  writer.EndNested(packet);
  if (!writer.overflowed() && sink.AppendPacket(writer.data(), writer.size())) info.id = id;

  size_t i = SlotOf(key, kSlots);
  while (slots_[i].function.load(std::memory_order_relaxed) != 0) i = (i + 1) & (kSlots - 1);
  slots_[i].info = info;
  slots_[i].function.store(key, std::memory_order_release);
  if (info.id != 0) next_id_.store(id + 1, std::memory_order_relaxed);
  return &slots_[i].info;
}

}  // namespace gpumem
