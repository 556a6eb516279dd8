// The in-process recorder: what the hooks in interpose/ (and later cupti/) call. It owns the
// trace file, the interning tables and the per-thread state. Every function here is safe to call
// from any hook, in any thread, before main, during exit and in a child after fork; none of them
// throws or changes errno; when recording fails the program carries on and the failure is counted.
#pragma once

#include <cstdint>

#include "core/trace_ids.h"

namespace gpumem {

struct MemoryRecord {
  uint64_t seq = 0;  // from NextSeq(): after the call for allocations, before it for frees
  proto::Api api = proto::Api::kUnknown;
  proto::MemoryKind kind = proto::MemoryKind::kUnknown;
  proto::Action action = proto::Action::kUnknown;
  int32_t device = -1;
  int32_t result = 0;
  uint64_t size = 0;
  uint64_t address = 0;
  uint64_t stream = 0;
  uint64_t pool = 0;
  uint64_t handle = 0;
  uint64_t offset = 0;
  uint64_t pitch = 0;
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
  uint64_t stack_id = 0;
};

// What the recorder needs from the interposer: the real loader functions (ours are hooked).
struct LoaderFunctions {
  void* (*dlopen)(const char*, int);
  void* (*dlsym)(void*, const char*);
};

namespace recorder {

// Reads options, loads libunwind, registers fork handlers. Idempotent; called from the preload
// library's constructor and again lazily by the first hook if that runs earlier.
void Init(const LoaderFunctions& loader);
bool Enabled();

uint64_t NextSeq();
// Interned id of the current native stack, starting at the caller of the hooked API (the frame
// that returns to `caller_pc`). 0 when stacks are off or unavailable.
uint64_t CaptureStack(uintptr_t caller_pc);
// Whether frees capture stacks too (GPUMEM_FREE_STACKS).
bool FreeStacks();
// Appends one memory event (fills in thread and time). Opens the trace at the first event.
void RecordMemory(const MemoryRecord& record);
// Writes a Device packet the first time `ordinal` is announced.
bool DeviceKnown(int ordinal);
void RecordDevice(int ordinal, const char* name, uint64_t total_memory);
// A driver entry point was handed out unwrapped (its real pointer differed from the one seen).
void CountHookConflict();

// Writes the footer and trims the file. Events after it are still recorded.
void Finish();
void AfterForkInChild();

}  // namespace recorder
}  // namespace gpumem
