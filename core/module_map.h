// The loaded ELF objects of the process, written to the trace as Module / ModuleUnload packets so
// that frames (absolute addresses) can be symbolized offline. Kept current across dlopen/dlclose
// without hooking dlopen (a wrapper would change the caller that dlopen resolves RUNPATH and
// $ORIGIN against): before a new stack is written, the loader's load/unload counters are checked
// and the object list rescanned when they moved.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/packet_sink.h"

struct dl_phdr_info;

namespace gpumem {

class ModuleMap {
 public:
  // Forgets everything (a new trace file): the next Refresh writes every module again.
  void Reset();
  // Writes packets for objects loaded or unloaded since the last call, if there were any.
  void RefreshIfChanged(PacketSink& sink);
  // Rescans unconditionally.
  void Refresh(PacketSink& sink);

 private:
  struct Entry {
    uint64_t load_bias;
    uint64_t start;
    uint64_t end;
    uint64_t path_hash;
    uint32_t id;
    uint32_t seen_in_scan;
    bool loaded;
  };
  static constexpr size_t kMaxModules = 8192;

  static int VisitObject(struct dl_phdr_info* info, size_t size, void* context);
  static int ReadCounters(struct dl_phdr_info* info, size_t size, void* context);

  std::atomic_flag lock_ = ATOMIC_FLAG_INIT;
  Entry entries_[kMaxModules] = {};
  size_t entry_count_ = 0;
  uint32_t next_id_ = 1;
  uint32_t scan_ = 0;
  unsigned long long last_adds_ = 0;
  unsigned long long last_subs_ = 0;
  bool scanned_once_ = false;
  PacketSink* sink_ = nullptr;  // valid during a scan
};

}  // namespace gpumem
