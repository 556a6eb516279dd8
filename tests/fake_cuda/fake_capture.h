// Stream capture in the fake driver, as strict as the real one where gpumem could trip it: a call
// that capture forbids invalidates the capture (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED to the
// caller, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED at cuStreamEndCapture), by the rules of the
// capture and thread modes. tests/fake_cuda/capture_rules.cc prints the rules; its output on a real
// GPU is capture_rules.expected, and CI checks the fake prints the same.
#pragma once

#include <cuda.h>

// The per-thread-default-stream forms, which cuda.h declares only for NVIDIA's own build.
extern "C" __attribute__((visibility("default"))) CUresult cuStreamBeginCapture_v2_ptsz(
    CUstream hStream, CUstreamCaptureMode mode);
extern "C" __attribute__((visibility("default"))) CUresult cuStreamEndCapture_ptsz(
    CUstream hStream, CUgraph* phGraph);
extern "C" __attribute__((visibility("default"))) CUresult cuStreamIsCapturing_ptsz(
    CUstream hStream, CUstreamCaptureStatus* captureStatus);

namespace fake_capture {

// For a "potentially unsafe" call (cuMemAlloc, cuMemFree, cuMemPoolGetAttribute, ...): CUDA_SUCCESS
// when the calling thread may make it now, else the captures it conflicts with are invalidated
// and the call must fail with the result returned.
CUresult CheckUnsafeCall();
// For a synchronisation: with `stream` null (cuCtxSynchronize) every capture in progress
// conflicts, else the capture of `stream`, whatever the modes.
CUresult CheckSynchronize(CUstream stream, bool whole_context);

}  // namespace fake_capture
