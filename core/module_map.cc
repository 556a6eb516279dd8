#include "core/module_map.h"

#include <elf.h>
#include <limits.h>
#include <link.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/eh_frame_unwinder.h"
#include "core/spin_lock.h"
#include "core/trace_ids.h"
#include "core/wire_writer.h"

namespace gpumem {
namespace {

uint64_t HashPath(const char* path) {
  uint64_t hash = 1469598103934665603ull;  // FNV-1a
  for (; *path != '\0'; ++path) hash = (hash ^ static_cast<uint8_t>(*path)) * 1099511628211ull;
  return hash;
}

// The GNU build id from the object's PT_NOTE segments, already mapped in memory.
size_t FindBuildId(const dl_phdr_info* info, const uint8_t** build_id) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& phdr = info->dlpi_phdr[i];
    if (phdr.p_type != PT_NOTE) continue;
    const uint8_t* note = reinterpret_cast<const uint8_t*>(info->dlpi_addr + phdr.p_vaddr);
    const uint8_t* end = note + phdr.p_memsz;
    while (note + sizeof(ElfW(Nhdr)) <= end) {
      const auto* header = reinterpret_cast<const ElfW(Nhdr)*>(note);
      const uint8_t* name = note + sizeof(ElfW(Nhdr));
      const uint8_t* desc = name + ((header->n_namesz + 3) & ~3u);
      const uint8_t* next = desc + ((header->n_descsz + 3) & ~3u);
      if (next > end) break;
      if (header->n_type == NT_GNU_BUILD_ID && header->n_namesz == 4 &&
          memcmp(name, "GNU", 4) == 0) {
        *build_id = desc;
        return header->n_descsz;
      }
      note = next;
    }
  }
  return 0;
}

}  // namespace

void ModuleMap::Reset() {
  lock_.clear();
  entry_count_ = 0;
  next_id_ = 1;
  scan_ = 0;
  last_adds_ = 0;
  last_subs_ = 0;
  scanned_once_ = false;
}

int ModuleMap::ReadCounters(dl_phdr_info* info, size_t size, void* context) {
  auto* self = static_cast<ModuleMap*>(context);
  if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
    bool changed = info->dlpi_adds != self->last_adds_ || info->dlpi_subs != self->last_subs_;
    // An unloaded module's addresses may hold other code now: its unwind rules go too.
    if (self->scanned_once_ && info->dlpi_subs != self->last_subs_)
      eh_frame_unwinder::ForgetRules();
    self->last_adds_ = info->dlpi_adds;
    self->last_subs_ = info->dlpi_subs;
    return changed ? 1 : 2;
  }
  return 1;  // no counters: always rescan
}

void ModuleMap::RefreshIfChanged(PacketSink& sink) {
  SpinGuard guard(lock_);
  if (scanned_once_ && dl_iterate_phdr(&ReadCounters, this) == 2) return;
  sink_ = &sink;
  ++scan_;
  dl_iterate_phdr(&VisitObject, this);
  dl_iterate_phdr(&ReadCounters, this);  // remember the counters this scan corresponds to
  scanned_once_ = true;
  // Whatever was not seen in this scan has been unloaded.
  for (size_t i = 0; i < entry_count_; ++i) {
    Entry& entry = entries_[i];
    if (!entry.loaded || entry.seen_in_scan == scan_) continue;
    entry.loaded = false;
    uint8_t buffer[64];
    wire::Writer writer(buffer, sizeof(buffer));
    size_t packet = writer.BeginNested(proto::trace_field::kPacket);
    size_t unload = writer.BeginNested(proto::packet_field::kModuleUnload);
    writer.Varint(proto::module_unload_field::kId, entry.id);
    writer.EndNested(unload);
    writer.EndNested(packet);
    sink.AppendPacket(writer.data(), writer.size());
  }
  sink_ = nullptr;
}

void ModuleMap::Refresh(PacketSink& sink) {
  {
    SpinGuard guard(lock_);
    scanned_once_ = false;
  }
  RefreshIfChanged(sink);
}

int ModuleMap::VisitObject(dl_phdr_info* info, size_t, void* context) {
  auto* self = static_cast<ModuleMap*>(context);
  uint64_t start = ~uint64_t{0};
  uint64_t end = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& phdr = info->dlpi_phdr[i];
    if (phdr.p_type != PT_LOAD) continue;
    uint64_t segment_start = info->dlpi_addr + phdr.p_vaddr;
    if (segment_start < start) start = segment_start;
    if (segment_start + phdr.p_memsz > end) end = segment_start + phdr.p_memsz;
  }
  if (end == 0) return 0;

  // The main program has no name here (/proc/self/exe tells); a library found through a
  // relative LD_LIBRARY_PATH has a relative one, useless once the process is gone.
  char resolved[PATH_MAX];
  const char* path = info->dlpi_name;
  if (path == nullptr || path[0] == '\0') {
    ssize_t n = readlink("/proc/self/exe", resolved, sizeof(resolved) - 1);
    resolved[n > 0 ? n : 0] = '\0';
    path = resolved;
  } else if (path[0] != '/' && strchr(path, '/') != nullptr &&
             realpath(path, resolved) != nullptr) {
    path = resolved;
  }
  uint64_t path_hash = HashPath(path);
  for (size_t i = 0; i < self->entry_count_; ++i) {
    Entry& entry = self->entries_[i];
    if (entry.loaded && entry.load_bias == info->dlpi_addr && entry.start == start &&
        entry.path_hash == path_hash) {
      entry.seen_in_scan = self->scan_;
      return 0;
    }
  }
  if (self->entry_count_ == kMaxModules) return 0;
  Entry& entry = self->entries_[self->entry_count_++];
  entry = Entry{info->dlpi_addr, start, end, path_hash, self->next_id_++, self->scan_, true};

  const uint8_t* build_id = nullptr;
  size_t build_id_size = FindBuildId(info, &build_id);
  uint8_t buffer[4096 + 256];
  wire::Writer writer(buffer, sizeof(buffer));
  size_t packet = writer.BeginNested(proto::trace_field::kPacket);
  size_t module = writer.BeginNested(proto::packet_field::kModule);
  writer.Varint(proto::module_field::kId, entry.id);
  writer.String(proto::module_field::kPath, path);
  writer.Bytes(proto::module_field::kBuildId, build_id, build_id_size);
  writer.Varint(proto::module_field::kLoadBias, entry.load_bias);
  writer.Varint(proto::module_field::kStart, start);
  writer.Varint(proto::module_field::kEnd, end);
  writer.EndNested(module);
  writer.EndNested(packet);
  if (!writer.overflowed()) self->sink_->AppendPacket(writer.data(), writer.size());
  return 0;
}

}  // namespace gpumem
