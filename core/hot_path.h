// Where the code that every recorded event runs is placed (hooks, stacks, encoding, the append).
//
// Inside a framework, gpumem's code is evicted from the caches between two events: each cache line
// of it that an event runs is then a miss, and those misses, more than instructions, were an
// event's cost on the H100 machine (a launch hook 1.9 µs there against 0.4 µs on a warm build
// machine). GPUMEM_HOT gathers those functions in one section (the linker groups .text.hot.*), so
// an event's code spans fewer lines and pages and the prefetchers stream it; GPUMEM_COLD keeps what
// runs once or rarely (opening the trace, a thread's first event, a new stack or kernel) out of
// the hot functions' lines.
#pragma once

#define GPUMEM_HOT __attribute__((section(".text.hot.gpumem")))
#define GPUMEM_COLD __attribute__((cold, noinline))
// The globals an event reads, whichever translation unit owns them, gathered in one section that
// the preload library's link lays out as a block of its own (interpose/hot_data.ld): a cold event
// then misses on a few adjacent lines of one page, not a line on each of a dozen pages (the
// switches, the clock's calibration, the thread-locals key, the driver's query table, the
// unwinder's state each lay in their own file's data).
#define GPUMEM_HOT_DATA __attribute__((section(".data.gpumem_hot")))
