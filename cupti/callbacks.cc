#include "cupti/callbacks.h"

#include <errno.h>

#include "core/driver_queries.h"
#include "core/thread_flags.h"
#include "cupti/callback_translation.h"
#include "cupti/subscriber.h"

namespace gpumem::cupti {
namespace {

constinit Sinks g_sinks{&recorder::RecordMemory, &recorder::RecordLaunch,
                        &recorder::RecordCuptiStatus, &recorder::RecordKernelTiming,
                        &recorder::RecordPoolUsage};

// A free or launch takes its sequence number at API_ENTER (as interposition does before the real
// call) and is recorded at API_EXIT. The number waits here, keyed by the call's correlation id
// (bit 32 marks the slot as used): calls do not nest on one thread at depth 0, and an exit whose
// entry was not seen (CUPTI subscribed mid-call) takes a fresh number.

uint64_t PendingKey(const CUpti_CallbackData& data) {
  return (uint64_t{1} << 32) | data.correlationId;
}

void TakeSeq(const CUpti_CallbackData& data) {
  ThreadLocals& locals = Locals();
  locals.pending_seq = recorder::NextSeq();
  locals.pending_call = PendingKey(data);
}

uint64_t PendingSeq(const CUpti_CallbackData& data) {
  ThreadLocals& locals = Locals();
  if (locals.pending_call == PendingKey(data)) {
    locals.pending_call = 0;
    return locals.pending_seq;
  }
  return recorder::NextSeq();
}

void RecordLaunchAtExit(CUpti_CallbackId cbid, const CUpti_CallbackData& data, uintptr_t caller) {
  LaunchRecord record;
  if (!TranslateLaunch(cbid, data, &record)) return;
  record.seq = PendingSeq(data);
  record.device = driver::ContextDevice(static_cast<void*>(data.context));
  if (record.device >= 0) driver::AnnounceDevice(record.device);
  record.stack_id = recorder::CaptureLaunchStack(caller);
  g_sinks.launch(record);
}

void RecordAllocationAtExit(CUpti_CallbackId cbid, const CUpti_CallbackData& data,
                            uintptr_t caller) {
  MemoryRecord record;
  if (!TranslateAllocation(cbid, data, &record)) return;
  record.seq = recorder::NextSeq();  // after the call, as interposition
  if (record.device == kDeviceOfContext)
    record.device = driver::ContextDevice(static_cast<void*>(data.context));
  if (WantsMemoryInfo(record)) driver::DeviceMemoryInfo(&record.free_bytes, &record.total_bytes);
  record.stack_id = recorder::CaptureStack(caller);
  if (record.device >= 0) driver::AnnounceDevice(record.device);
  g_sinks.memory(record);
  if (record.kind == proto::MemoryKind::kPool && record.action == proto::Action::kAlloc) {
    driver::NotePoolUsage(record.pool, record.device, record.address, record.size);
  }
}

void RecordFreeAtExit(CUpti_CallbackId cbid, const CUpti_CallbackData& data, uintptr_t caller) {
  MemoryRecord record;
  if (!TranslateFree(cbid, data, &record)) return;
  record.seq = PendingSeq(data);
  if (recorder::FreeStacks()) record.stack_id = recorder::CaptureStack(caller);
  g_sinks.memory(record);
}

}  // namespace

Sinks RecorderSinks() {
  return Sinks{&recorder::RecordMemory, &recorder::RecordLaunch, &recorder::RecordCuptiStatus,
               &recorder::RecordKernelTiming, &recorder::RecordPoolUsage};
}

const Sinks& CurrentSinks() { return g_sinks; }

void SetSinks(const Sinks& sinks) { g_sinks = sinks; }

void HandleDriverCallback(CUpti_CallbackId cbid, const CUpti_CallbackData& data, uintptr_t caller) {
  const CallbackInfo info = Classify(cbid);
  if (info.kind == CallbackClass::kIgnored) return;
  const bool entry = data.callbackSite == CUPTI_API_ENTER;
  if (info.kind != CallbackClass::kLaunch && !entry) NoteMemoryCallback(Locals().hook_depth > 0);
  if (Locals().hook_depth > 0) {
    // Interposition records this call; its launch wrapper takes CUPTI's correlation id from here.
    if (info.kind == CallbackClass::kLaunch && entry)
      Locals().launch_correlation_id = data.correlationId;
    return;
  }
  if (!recorder::Enabled()) return;
  if (info.kind == CallbackClass::kLaunch && !recorder::LaunchesEnabled()) return;
  OwnWorkScope own_work;  // nothing done while recording is seen again (by a hook or by this one)
  switch (info.kind) {
    case CallbackClass::kLaunch:
      if (!entry) {
        RecordLaunchAtExit(cbid, data, caller);
      } else if (LaunchIsRecorded(cbid, data)) {
        TakeSeq(data);
      }
      break;
    case CallbackClass::kFree:
      if (!entry) {
        RecordFreeAtExit(cbid, data, caller);
      } else if (FreeIsRecorded(cbid, data)) {
        TakeSeq(data);
      }
      break;
    case CallbackClass::kAllocation:
      if (!entry) RecordAllocationAtExit(cbid, data, caller);
      break;
    case CallbackClass::kIgnored:
      break;
  }
}

__attribute__((noinline)) void CUPTIAPI OnCallback(void* /*userdata*/, CUpti_CallbackDomain domain,
                                                   CUpti_CallbackId cbid, const void* cbdata) {
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API || cbdata == nullptr) return;
  const auto& data = *static_cast<const CUpti_CallbackData*>(cbdata);
  HandleDriverCallback(cbid, data, reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
  if (data.callbackSite == CUPTI_API_EXIT) DetachAtExitIfPending();
}

}  // namespace gpumem::cupti
