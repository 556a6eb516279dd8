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
