# Sourced by the benchmark scripts: sets `pin` to a command prefix that runs a process on the
# CPUs in GPUMEM_BENCH_CPUS (default 2-5) when taskset can, else to nothing. Every run of an A/B
# comparison goes to the same CPUs: on the H100 machine (16 cores) where a fresh process landed
# moved its timings by up to ±25 %, more than the differences measured.
pin=()
if command -v taskset >/dev/null && taskset -c "${GPUMEM_BENCH_CPUS:-2-5}" true 2>/dev/null; then
  pin=(taskset -c "${GPUMEM_BENCH_CPUS:-2-5}")
fi
