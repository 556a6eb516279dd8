// Wrapper bodies of the driver's stream-capture entry points (cuStreamBeginCapture,
// cuStreamBeginCaptureToGraph, cuStreamEndCapture): they keep core/stream_capture.h's record of
// the captures in progress, which recording consults so that it makes no driver call a capture
// forbids and marks the memory made for a graph. driver_hooks.cc instantiates them for every way
// they are reached, as it does the memory bodies; libcudart's cudaStreamBeginCapture and
// cudaStreamEndCapture arrive here through cuGetProcAddress.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace gpumem {

CUresult StreamBeginCaptureBody(decltype(&cuStreamBeginCapture_v2) real, uintptr_t caller,
                                CUstream stream, CUstreamCaptureMode mode);
CUresult StreamBeginCaptureToGraphBody(decltype(&cuStreamBeginCaptureToGraph) real,
                                       uintptr_t caller, CUstream stream, CUgraph graph,
                                       const CUgraphNode* dependencies,
                                       const CUgraphEdgeData* dependency_data,
                                       size_t dependency_count, CUstreamCaptureMode mode);
CUresult StreamEndCaptureBody(decltype(&cuStreamEndCapture) real, uintptr_t caller, CUstream stream,
                              CUgraph* graph);

}  // namespace gpumem
