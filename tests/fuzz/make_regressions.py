#!/usr/bin/env python3
"""Writes the crafted traces of tests/fuzz/regressions/ (see tests/fuzz/README.md).

Each is a trace no recorder writes, made to reach the limits of the analyzer: sizes near 2^64,
stacks 50,000 frames deep. The wire format is written by hand (core/trace.proto; no protobuf
module needed), so the files are the same wherever this runs:

    python3 tests/fuzz/make_regressions.py [DIRECTORY]   # default: tests/fuzz/regressions
"""
import os
import sys

U64 = (1 << 64) - 1


def varint(value):
    value &= U64  # negative int32 fields are 10-byte two's complement on the wire
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def message(*fields):
    """fields: (number, value): int (varint, 0 left out), bool, str/bytes, or a list of ints
    (packed)."""
    out = b""
    for number, value in fields:
        if isinstance(value, (str, bytes)):
            data = value.encode() if isinstance(value, str) else value
            out += varint(number << 3 | 2) + varint(len(data)) + data
        elif isinstance(value, list):
            if value:
                data = b"".join(varint(v) for v in value)
                out += varint(number << 3 | 2) + varint(len(data)) + data
        elif value:
            out += varint(number << 3) + varint(int(value))
    return out


def packet(field, body):
    """A TracePacket with `body` as its field `field`, framed as field 1 of Trace."""
    inner = varint(field << 3 | 2) + varint(len(body)) + body
    return b"\x0a" + varint(len(inner)) + inner


# TracePacket fields and enum values of core/trace.proto.
HEADER, DEVICE, MODULE, STACK, MEMORY, FOOTER = 1, 2, 3, 6, 7, 8
KERNEL_NAME, LAUNCH, POOL_USAGE, PYTHON_CODE = 10, 11, 14, 16
CUDA_MALLOC, CUDA_FREE, CUDA_MALLOC_ASYNC, CUDA_FREE_ASYNC = 1, 2, 3, 4
CU_MEM_ADDRESS_RESERVE, CU_MEM_ADDRESS_FREE, CU_MEM_CREATE, CU_MEM_RELEASE = 39, 40, 41, 42
CU_MEM_MAP, CU_MEM_UNMAP = 43, 44
KIND_UNKNOWN, DEVICE_KIND, VMM_RESERVATION, VMM_PHYSICAL, VMM_MAPPING, POOL = 0, 1, 4, 5, 6, 7
ALLOC, FREE, ALLOC_FAILED = 1, 2, 3
CU_LAUNCH_KERNEL = 1


def zigzag(value):
    """A sint64 on the wire."""
    return ((value << 1) ^ (value >> 63)) & U64


def event_ref(writer, slot, seq_delta=0, time_delta=0, correlation_delta=0):
    """An EventRef (format 2), framed as field 2 of Trace."""
    body = message((1, writer), (2, slot), (3, zigzag(seq_delta)), (4, zigzag(time_delta)),
                   (5, zigzag(correlation_delta)))
    return b"\x12" + varint(len(body)) + body


class Trace:
    def __init__(self, pid, format_version=1):
        self.data = packet(HEADER, message((1, format_version), (2, "crafted"), (3, pid),
                                           (7, 1000)))
        self.seq = 0

    def add(self, field, body):
        self.data += packet(field, body)

    def memory(self, api, kind, action, device, size, address, stack=0, stream=0, handle=0,
               result=0, timestamp=None, free_bytes=0, total_bytes=0, writer=0, slot=0):
        self.seq += 1
        self.add(MEMORY, message(
            (1, self.seq), (2, timestamp if timestamp is not None else 1000 + 1000 * self.seq),
            (3, 7), (4, device), (5, api), (6, kind), (7, action), (8, size), (9, address),
            (10, stream), (12, result), (13, stack), (14, handle), (16, free_bytes),
            (17, total_bytes), (20, writer), (21, slot)))

    def free(self, address, api=CUDA_FREE):
        self.memory(api, KIND_UNKNOWN, FREE, -1, 0, address)

    def launch(self, stack, pointers, writer=0, slot=0, correlation=0):
        self.seq += 1
        self.add(LAUNCH, message((1, self.seq), (2, 1000 + 1000 * self.seq), (3, 7), (4, 0),
                                 (5, CU_LAUNCH_KERNEL), (6, 1), (7, 1), (10, 32), (14, 5),
                                 (15, correlation), (16, stack), (19, pointers), (22, writer),
                                 (23, slot)))

    def ref(self, writer, slot, seq_delta=0, time_delta=0, correlation_delta=0):
        """A reference; the seq it stands for is not tracked (deltas may jump anywhere)."""
        self.data += event_ref(writer, slot, seq_delta, time_delta, correlation_delta)

    def finish(self):
        self.add(FOOTER, message((1, self.seq), (6, True)))
        return self.data


def device(trace, total):
    trace.add(DEVICE, message((1, 0), (2, "crafted device"), (3, total)))


def huge_sizes_tensors():
    """PyTorch tensors (stream-ordered allocations from libc10_cuda.so) of sizes near 2^64: the
    allocator models (whatif, the summary's modelled rows) rounded them past 2^64, to blocks and
    segments of 0 bytes, until a free wrote outside its block table. The device's memory is not
    known (0): the models have no limit."""
    trace = Trace(101)
    device(trace, 0)
    trace.add(MODULE, message((1, 1), (2, "/crafted/libc10_cuda.so"), (4, 0x400000),
                              (5, 0x400000), (6, 0x500000)))
    trace.add(STACK, message((1, 1), (2, [0x401000, 0x402000])))

    def tensor(id, size, stream):
        trace.memory(CUDA_MALLOC_ASYNC, POOL, ALLOC, 0, size, id << 32, stack=1, stream=stream)

    def free(id):
        trace.free(id << 32, CUDA_FREE_ASYNC)

    # The sequence that broke the native model (found by a random driver of it): a free wrote
    # outside its segment's block table, and glibc's free() aborted.
    tensor(1, U64 - 511, 1)
    free(1)
    tensor(2, U64, 0)
    tensor(3, U64 - 511, 0)
    tensor(4, 1000, 1)
    tensor(5, U64 - 511, 0)
    tensor(6, 512, 0)
    free(6)
    tensor(7, 12582912, 0)
    free(5)
    tensor(8, U64, 1)
    tensor(9, U64, 1)
    free(3)
    tensor(10, U64 - 511, 1)
    free(10)
    tensor(11, 12582912, 1)
    tensor(12, U64, 1)
    tensor(13, 1000, 0)
    tensor(14, U64, 0)
    free(13)
    tensor(15, 1000, 0)
    free(4)
    tensor(16, U64 - 511, 1)
    free(9)
    tensor(17, 512, 0)
    free(8)
    # Every size near a limit, on two streams.
    sizes = [U64, U64 - 511, 1 << 63, (1 << 48) + 1, 1 << 48, 1000, 3 << 20, U64 - (20 << 20)]
    for stream in (5, 6):
        for i, size in enumerate(sizes):
            tensor(0x100 * stream + i, size, stream)
        for i in (1, 5, 0, 6):
            free(0x100 * stream + i)
        for i, size in enumerate(sizes):
            tensor(0x1000 * stream + i, size, stream)
    trace.memory(CUDA_MALLOC_ASYNC, POOL, ALLOC_FAILED, 0, U64, 0, stack=1, stream=5, result=2,
                 free_bytes=1 << 20, total_bytes=80 << 30)
    trace.add(POOL_USAGE, message((1, 1), (2, 0), (3, U64), (4, U64), (5, 1000 + 1000 * trace.seq)))
    trace.add(POOL_USAGE, message((1, 2), (2, 0), (3, U64), (4, 1), (5, 1000 + 1000 * trace.seq)))
    return trace.finish()


def huge_sizes_plain():
    """A plain CUDA program's allocations, VMM memory, pool sizes, a failed allocation and kernel
    pointers near 2^64, with timestamps and seqs at the ends of their range."""
    trace = Trace(102)
    device(trace, U64)
    trace.add(STACK, message((1, 1), (2, [0x401000])))
    trace.add(KERNEL_NAME, message((1, 1), (2, "_Z6kernelPf")))
    top = U64 - 0xFFF
    trace.memory(CUDA_MALLOC, DEVICE_KIND, ALLOC, 0, U64, 0x1000, stack=1, timestamp=0)
    trace.memory(CUDA_MALLOC, DEVICE_KIND, ALLOC, 0, U64 - 100, top, stack=1)
    trace.memory(CUDA_MALLOC, DEVICE_KIND, ALLOC, 0, 1 << 48, 0x7000000000, stack=1)
    trace.memory(CUDA_MALLOC, DEVICE_KIND, ALLOC, 0, (1 << 48) - 1, 0x2000000000000, stack=1)
    trace.memory(CUDA_MALLOC_ASYNC, POOL, ALLOC, 0, U64 - 7, 0x4000000000000, stack=1, stream=5)
    trace.launch(1, [0x1000, top, 0x7000000000, U64])
    trace.memory(CUDA_MALLOC, DEVICE_KIND, ALLOC_FAILED, 0, U64, 0, stack=1, result=2,
                 free_bytes=U64, total_bytes=U64)
    trace.memory(CU_MEM_ADDRESS_RESERVE, VMM_RESERVATION, ALLOC, 0, U64, 0x3000000000000)
    trace.memory(CU_MEM_CREATE, VMM_PHYSICAL, ALLOC, 0, U64, 0, stack=1, handle=9)
    trace.memory(CU_MEM_CREATE, VMM_PHYSICAL, ALLOC, 0, 1 << 47, 0, stack=1, handle=10)
    trace.memory(CU_MEM_MAP, VMM_MAPPING, ALLOC, 0, U64, top, handle=9)
    trace.memory(CU_MEM_MAP, VMM_MAPPING, ALLOC, 0, U64 - 0x10000, 0x3000000000000, handle=10)
    trace.add(POOL_USAGE, message((1, 1), (2, 0), (3, U64), (5, 5000)))
    trace.add(POOL_USAGE, message((1, 2), (2, 0), (3, U64 - 1), (5, 6000)))
    trace.memory(CU_MEM_UNMAP, VMM_MAPPING, FREE, -1, U64, top)
    trace.memory(CU_MEM_RELEASE, VMM_PHYSICAL, FREE, -1, 0, 0, handle=9)
    trace.memory(CU_MEM_ADDRESS_FREE, VMM_RESERVATION, FREE, -1, U64, 0x3000000000000)
    trace.free(0x1000)
    trace.seq = U64 - 2
    trace.memory(CUDA_MALLOC, DEVICE_KIND, ALLOC, 0, 1 << 40, 0x6000000000000, stack=1,
                 timestamp=U64)
    return trace.finish()


def deep_stacks():
    """One native stack and one Python stack, each 50,000 frames deep, holding memory at the peak
    and at the end, failing an allocation and launching a kernel."""
    trace = Trace(103)
    device(trace, 80 << 30)
    depth = 50000
    trace.add(STACK, message((1, 1), (2, [0x10 + i % 64 for i in range(depth)])))
    trace.add(PYTHON_CODE, message((1, 1), (2, "/crafted/deep.py"), (3, "recurse"), (4, 1)))
    # Python frames: code 1 each, line and group left out (0).
    trace.add(STACK, message((1, 2), (2, [0x20]), (4, [1] * depth)))
    trace.add(KERNEL_NAME, message((1, 1), (2, "_Z6kernelPf")))
    for stack, address in ((1, 0x10000000), (2, 0x20000000)):
        trace.memory(CUDA_MALLOC, DEVICE_KIND, ALLOC, 0, 4 << 20, address, stack=stack)
        trace.memory(CUDA_MALLOC, DEVICE_KIND, ALLOC, 0, 1 << 20, address + 0x80000000, stack=stack)
        trace.launch(stack, [address])
        trace.memory(CUDA_MALLOC, DEVICE_KIND, ALLOC_FAILED, 0, 1 << 40, 0, stack=stack, result=2,
                     free_bytes=1 << 30, total_bytes=80 << 30)
        trace.free(address + 0x80000000)
    return trace.finish()


def event_refs_unresolved():
    """Format 2: references that resolve to nothing (before any full event, to a writer never
    seen, to a slot never defined, to a slot beyond the readers' table), full events defining
    slot numbers 0, the largest the table keeps and 2^32 - 1, writer 2^32 - 1, and a writer's
    memory slot redefined as a launch and back."""
    trace = Trace(104, format_version=2)
    device(trace, 80 << 30)
    trace.add(STACK, message((1, 1), (2, [0x401000])))
    trace.add(KERNEL_NAME, message((1, 1), (2, "_Z6kernelPf")))
    top = (1 << 32) - 1
    trace.ref(1, 1)  # before any full event
    trace.memory(CUDA_MALLOC, DEVICE_KIND, ALLOC, 0, 1 << 20, 0x10000000, stack=1, writer=1,
                 slot=1)
    trace.free(0x10000000)
    trace.ref(1, 1)
    trace.ref(9, 1)  # an unknown writer
    trace.ref(1, 2)  # an undefined slot
    trace.ref(1, top)
    trace.memory(CUDA_MALLOC, DEVICE_KIND, ALLOC, 0, 2 << 20, 0x20000000, stack=1, writer=1,
                 slot=top)
    trace.ref(1, top)
    trace.memory(CUDA_MALLOC, DEVICE_KIND, ALLOC, 0, 3 << 20, 0x30000000, stack=1, writer=top,
                 slot=1 << 16)
    trace.ref(top, 1 << 16)
    trace.ref(top, (1 << 16) + 1)
    trace.ref(top, 0)
    trace.launch(1, [0x20000000], writer=1, slot=1, correlation=5)  # slot 1 becomes a launch
    trace.ref(1, 1, correlation_delta=1)
    trace.memory(CUDA_MALLOC, DEVICE_KIND, ALLOC, 0, 4 << 20, 0x40000000, stack=1, writer=1,
                 slot=1)
    trace.ref(1, 1, correlation_delta=-7)  # a memory event's reference with a correlation delta
    trace.memory(CUDA_MALLOC, DEVICE_KIND, ALLOC, 0, 5 << 20, 0x50000000, stack=1, writer=2,
                 slot=0)
    trace.ref(2, 0)
    return trace.finish()


def event_refs_deltas():
    """Format 2: references whose seq, timestamp and correlation deltas overflow (wrapping past
    2^64 and back, seqs far behind and ahead of the window), to an allocation, a free and a
    launch, before a full event and a footer."""
    trace = Trace(105, format_version=2)
    device(trace, 80 << 30)
    trace.add(STACK, message((1, 1), (2, [0x401000])))
    trace.add(KERNEL_NAME, message((1, 1), (2, "_Z6kernelPf")))
    low, high = -(1 << 63), (1 << 63) - 1
    trace.memory(CUDA_MALLOC, DEVICE_KIND, ALLOC, 0, 1 << 20, 0x10000000, stack=1, writer=1,
                 slot=1)
    trace.memory(CUDA_FREE, KIND_UNKNOWN, FREE, -1, 0, 0x10000000, writer=1, slot=2)
    trace.launch(1, [0x10000000], writer=1, slot=3, correlation=U64)
    for seq_delta, time_delta in ((high, high), (high, high), (low, low), (-2, -1), (0, 0),
                                  (-1, low), (1 << 40, 1), (low, high)):
        for slot in (1, 3, 2):
            trace.ref(1, slot, seq_delta, time_delta, high if slot == 3 else 0)
    trace.memory(CUDA_MALLOC, DEVICE_KIND, ALLOC, 0, 2 << 20, 0x20000000, stack=1, writer=1,
                 slot=1)
    trace.ref(1, 1, -1, -1)  # the seq of the full event before it
    trace.seq = U64 - 1
    return trace.finish()


TRACES = {
    "huge-sizes-tensors.trace": huge_sizes_tensors,
    "huge-sizes-plain.trace": huge_sizes_plain,
    "deep-stacks.trace": deep_stacks,
    "event-refs-unresolved.trace": event_refs_unresolved,
    "event-refs-deltas.trace": event_refs_deltas,
}


def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "regressions")
    for name, make in TRACES.items():
        with open(os.path.join(directory, name), "wb") as out:
            out.write(make())


if __name__ == "__main__":
    main()
