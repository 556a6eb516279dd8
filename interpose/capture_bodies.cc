#include "interpose/capture_bodies.h"

#include "core/stream_capture.h"
#include "interpose/hook_guard.h"

namespace gpumem {
namespace {

proto::CaptureMode ModeOf(CUstreamCaptureMode mode) {
  switch (mode) {
    case CU_STREAM_CAPTURE_MODE_GLOBAL:
      return proto::CaptureMode::kGlobal;
    case CU_STREAM_CAPTURE_MODE_THREAD_LOCAL:
      return proto::CaptureMode::kThreadLocal;
    case CU_STREAM_CAPTURE_MODE_RELAXED:
      return proto::CaptureMode::kRelaxed;
  }
  return proto::CaptureMode::kUnknown;
}

// After a begin call: the capture is noted whether or not recording is on (gpumem's own driver
// calls must respect it either way), and recorded when it is.
CUresult NoteBegin(const HookScope& scope, CUresult result, CUstream stream,
                   CUstreamCaptureMode mode) {
  if (result != CUDA_SUCCESS) return result;
  ErrnoKeeper keep;
  const auto stream_id = reinterpret_cast<uintptr_t>(stream);
  const uint64_t capture = capture::Began(stream_id);
  if (scope.recording()) recorder::RecordStreamCapture(capture, stream_id, ModeOf(mode), false, 0);
  return result;
}

}  // namespace

CUresult StreamBeginCaptureBody(decltype(&cuStreamBeginCapture_v2) real, uintptr_t /*caller*/,
                                CUstream stream, CUstreamCaptureMode mode) {
  HookScope scope;
  return NoteBegin(scope, real(stream, mode), stream, mode);
}

CUresult StreamBeginCaptureToGraphBody(decltype(&cuStreamBeginCaptureToGraph) real,
                                       uintptr_t /*caller*/, CUstream stream, CUgraph graph,
                                       const CUgraphNode* dependencies,
                                       const CUgraphEdgeData* dependency_data,
                                       size_t dependency_count, CUstreamCaptureMode mode) {
  HookScope scope;
  return NoteBegin(scope,
                   real(stream, graph, dependencies, dependency_data, dependency_count, mode),
                   stream, mode);
}

// The capture ends whatever the call returns (an invalidated capture ends with an error), except
// when the call came from a thread that may not end it.
CUresult StreamEndCaptureBody(decltype(&cuStreamEndCapture) real, uintptr_t /*caller*/,
                              CUstream stream, CUgraph* graph) {
  HookScope scope;
  const CUresult result = real(stream, graph);
  if (result == CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD) return result;
  ErrnoKeeper keep;
  const auto stream_id = reinterpret_cast<uintptr_t>(stream);
  const uint64_t capture = capture::Ended(stream_id);
  if (capture != 0 && scope.recording()) {
    recorder::RecordStreamCapture(capture, stream_id, proto::CaptureMode::kUnknown, true, result);
  }
  return result;
}

}  // namespace gpumem
