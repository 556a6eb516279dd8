# Sourced by the benchmark scripts: sets `pin` to a command prefix that runs a process on the
# CPUs in GPUMEM_BENCH_CPUS (default 2-5) when taskset can, else to nothing. Every run of an A/B
# comparison goes to the same CPUs: where a fresh process lands moves its timings by more than the
# differences measured (tests/bench/RESULTS.md, "PyTorch step time").
pin=()
if command -v taskset >/dev/null && taskset -c "${GPUMEM_BENCH_CPUS:-2-5}" true 2>/dev/null; then
  pin=(taskset -c "${GPUMEM_BENCH_CPUS:-2-5}")
fi
