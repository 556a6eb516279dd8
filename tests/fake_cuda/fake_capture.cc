#include "tests/fake_cuda/fake_capture.h"

#include <pthread.h>

#include <map>
#include <mutex>

#define FAKE_CUDA_EXPORT extern "C" __attribute__((visibility("default")))

namespace fake_capture {
namespace {

struct Capture {
  CUstreamCaptureMode mode;
  pthread_t thread;  // the one that began it
  bool invalidated = false;
};

struct CaptureState {
  std::mutex mutex;
  std::map<CUstream, Capture> captures;  // in progress, by stream
};

CaptureState& State() {
  static CaptureState* state = new CaptureState;  // leaked: calls may come during exit
  return *state;
}

// The calling thread's interaction mode (cuThreadExchangeStreamCaptureMode); global by default.
thread_local CUstreamCaptureMode t_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

// As the driver documents the modes: a relaxed thread may make any call; otherwise its own
// captures (unless begun relaxed) forbid it, and in global mode so do other threads' global ones.
bool Forbids(const Capture& capture) {
  if (t_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return false;
  if (pthread_equal(capture.thread, pthread_self())) {
    return capture.mode != CU_STREAM_CAPTURE_MODE_RELAXED;
  }
  return t_mode == CU_STREAM_CAPTURE_MODE_GLOBAL && capture.mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
}

CUresult Invalidate(Capture& capture) {
  capture.invalidated = true;
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult Begin(CUstream stream, CUstreamCaptureMode mode) {
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (stream == nullptr || stream == CU_STREAM_LEGACY) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  CaptureState& s = State();
  std::lock_guard lock(s.mutex);
  if (!s.captures.try_emplace(stream, Capture{mode, pthread_self()}).second) {
    return CUDA_ERROR_ILLEGAL_STATE;  // already capturing
  }
  return CUDA_SUCCESS;
}

CUresult End(CUstream stream, CUgraph* graph) {
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  bool invalidated;
  {
    CaptureState& s = State();
    std::lock_guard lock(s.mutex);
    auto it = s.captures.find(stream);
    if (it == s.captures.end()) return CUDA_ERROR_ILLEGAL_STATE;
    if (it->second.mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
        !pthread_equal(it->second.thread, pthread_self())) {
      return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    }
    invalidated = it->second.invalidated;
    s.captures.erase(it);
  }
  *graph = nullptr;
  if (invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  return cuGraphCreate(graph, 0);  // what was captured is not kept: launches do nothing here
}

CUresult IsCapturing(CUstream stream, CUstreamCaptureStatus* status) {
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CaptureState& s = State();
  std::lock_guard lock(s.mutex);
  auto it = s.captures.find(stream);
  *status = it == s.captures.end()   ? CU_STREAM_CAPTURE_STATUS_NONE
            : it->second.invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                     : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  return CUDA_SUCCESS;
}

}  // namespace

CUresult CheckUnsafeCall() {
  CaptureState& s = State();
  std::lock_guard lock(s.mutex);
  CUresult result = CUDA_SUCCESS;
  for (auto& [stream, capture] : s.captures) {
    if (Forbids(capture)) result = Invalidate(capture);
  }
  return result;
}

CUresult CheckSynchronize(CUstream stream, bool whole_context) {
  CaptureState& s = State();
  std::lock_guard lock(s.mutex);
  CUresult result = CUDA_SUCCESS;
  for (auto& [captured, capture] : s.captures) {
    if (whole_context || captured == stream) result = Invalidate(capture);
  }
  return result;
}

}  // namespace fake_capture

// ---- The driver's entry points ----

FAKE_CUDA_EXPORT CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) {
  return fake_capture::Begin(hStream, mode);
}
FAKE_CUDA_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode) {
  return fake_capture::Begin(hStream, mode);
}
FAKE_CUDA_EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph* phGraph) {
  return fake_capture::End(hStream, phGraph);
}
FAKE_CUDA_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph* phGraph) {
  return fake_capture::End(hStream, phGraph);
}
FAKE_CUDA_EXPORT CUresult cuStreamIsCapturing(CUstream hStream,
                                              CUstreamCaptureStatus* captureStatus) {
  return fake_capture::IsCapturing(hStream, captureStatus);
}
FAKE_CUDA_EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream hStream,
                                                   CUstreamCaptureStatus* captureStatus) {
  return fake_capture::IsCapturing(hStream, captureStatus);
}
FAKE_CUDA_EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  if (mode == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::swap(*mode, fake_capture::t_mode);
  return CUDA_SUCCESS;
}
