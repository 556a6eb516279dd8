// Which CUDA stream captures are in progress, for the two things recording must do differently
// while a program captures a CUDA graph: make no driver call that capture forbids (a forbidden
// call invalidates the program's capture: cudaErrorStreamCaptureInvalidated at its end), and mark
// the memory made for the graph. The interposed begin/end-capture entry points keep this up to
// date (interpose/capture_hooks.cc); lock-free, no allocation.
#pragma once

#include <cstdint>

namespace gpumem::capture {

// A capture began on `stream`: returns gpumem's number for it (from 1) and notes it as
// the calling thread's capture.
uint64_t Began(uint64_t stream);
// The capture on `stream` ended (its graph made or not): its number, 0 when none was known.
uint64_t Ended(uint64_t stream);

// Whether any capture is in progress anywhere in the process. In the default (global) mode a
// capture forbids "potentially unsafe" calls from every thread, so gpumem makes none of its own
// while this is true. One relaxed load: the common answer, false, costs nothing.
bool AnyInProgress();

// The capture in progress on `stream` (begun there), or 0.
uint64_t OfStream(uint64_t stream);
// The capture the calling thread began and has not ended, or 0. Memory a thread allocates while
// it captures is for the graph: PyTorch's private graph pools allocate their segments so.
uint64_t OfThread();

}  // namespace gpumem::capture
