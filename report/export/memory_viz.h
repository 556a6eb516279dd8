// `gpumem export --format memory-viz`: a trace as PyTorch's memory snapshot, the pickle that
// `torch.cuda.memory._dump_snapshot()` writes, for PyTorch's viewer (pytorch.org/memory_viz,
// `torch.cuda._memory_viz`). Written by report/export/pickle_writer.h: no Python needed.
//
// The snapshot is a dict: `segments`, what is live at the end of the trace, and `device_traces`,
// one list per device index of the events that led there. How a trace maps onto PyTorch's
// segments (memory the allocator took from CUDA) and blocks (allocations inside them):
//
// - A plain allocation (cudaMalloc, cuMemAlloc, managed, cudaMallocAsync, ...) is a segment that
//   holds one block of its whole size: `segment_alloc` then `alloc` when it is made;
//   `free_requested`, `free_completed`, `segment_free` when it is freed (or dropped under a newer
//   allocation over it). This is a plain CUDA program, every library's workspace (cuBLAS, cuDNN),
//   and a tensor-level PyTorch trace (backend:cudaMallocAsync: each allocation is a tensor).
//   Stream-ordered frees complete on their stream later than the trace can see: both free events
//   carry the time of the free call.
// - A segment of PyTorch's caching allocator (a trace recorded under its default allocator, where
//   gpumem sees only the segments, by the stack's module libc10_cuda.so:
//   report/stacks/memory_holders.h) is a segment alone, `segment_alloc` / `segment_free`: the
//   tensors inside it were not recorded, so at the end it holds one `inactive` block of its size
//   (allocated, active and requested size 0).
// - VMM: each mapping (cuMemMap) is a segment `segment_map`ped at its address, with
//   `is_expandable` true, `segment_unmap`ped by the cuMemUnmap that covers it; its device is that
//   of the physical memory mapped. Mappings of PyTorch's expandable segments hold no recorded
//   block (as above); another program's mappings hold one block of their size, as a plain
//   allocation. Reservations (address space) and cuMemCreate/cuMemRelease themselves are not
//   entries.
// - A failed allocation is an `oom` entry: `size` requested, `device_free` the free memory the
//   driver reported then (0 when not recorded).
// - Pinned host memory and allocations whose device the trace does not know are left out.
//
// Every entry has `action`, `addr` (not for `oom`), `size`, `stream`, `time_us` (wall clock, µs
// since the epoch, as PyTorch's; never going back within a device's list, since the viewer orders
// by position) and `frames`: the stack that made it (a free without a stack of its own: its
// allocation's), innermost first as PyTorch gives them, each `{"filename", "line", "name"}`,
// Python frames spliced in; a native frame without line information has the module's path as
// filename ("??" outside any module) and `module+0xoffset` as name when there is no symbol. Each
// stack's frame list is written once per list and referred to by the pickle's memo after that.
// Segments: `device`, `address`, `total_size`, `allocated_size`, `active_size`, `requested_size`,
// `stream`, `segment_type` ("small" up to 1 MiB, else "large", PyTorch's pools), `segment_pool_id`
// (0, 0), `is_expandable`, `frames` and `blocks` (`address`, `size`, `requested_size`, `state`
// "active_allocated" or "inactive", `frames`), which tile the segment.
#ifndef GPUMEM_REPORT_EXPORT_MEMORY_VIZ_H_
#define GPUMEM_REPORT_EXPORT_MEMORY_VIZ_H_

#include <memory>
#include <string>

#include "report/replay/replay.h"
#include "report/trace/progress.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

// Replays `file` (opened, not read yet) and appends the snapshot pickle to `*out`. The replay is
// returned: its file says how the trace ended. `progress` may be null.
TraceReplay ExportMemoryViz(std::unique_ptr<TraceFile> file, Progress* progress, std::string* out);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_EXPORT_MEMORY_VIZ_H_
