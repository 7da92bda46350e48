#!/bin/sh
# Instructions libvgpu.so adds per call, counted by valgrind's callgrind (exact and repeatable,
# unlike wall time on a shared machine): each case of vgpu_limiter_bench runs a fixed number of
# iterations straight to the fake driver and through libvgpu.so, and the inclusive count of the
# benchmark function is divided by the iterations. docs/limiter.md, section 8, has the figures.
#
# Usage: tests/bench/hooks/callgrind.sh <build folder> [iterations]
# Prints one line per case: case, condition, direct, through libvgpu, added (instructions/call).
set -eu
B=$(cd "${1:?build folder}" && pwd)
N=${2:-20000}
BENCH=$B/bin/vgpu_limiter_bench
[ -x "$BENCH" ] || { echo "no $BENCH: build vgpu_limiter_bench first" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 2; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
printf 'gpu memory_mib=16384 sm_count=132 context_mib=8\n' >"$W/gpus.conf"
printf 'gpu memory_mib=16384 sm_count=132 context_mib=8\ngpu memory_mib=16384 sm_count=132 context_mib=8\n' >"$W/gpus2.conf"

# count <case> <direct|vgpu> <env...>: instructions per iteration of the case's function
count() {
  c=$1 path=$2
  shift 2
  out="$W/cg.$c.$path.$$"
  env LD_LIBRARY_PATH="$B/lib/fakegpu" VGPU_FAKE_GPU_CONFIG="${CONF:-$W/gpus.conf}" VGPU_BENCH_ITERATIONS="$N" \
    CUDA_DEVICE_MEMORY_SHARED_CACHE="$W/region.$c.$path.$$" "$@" \
    valgrind --tool=callgrind --callgrind-out-file="$out" "$BENCH" --benchmark_filter="^$c/$path(/|\$)" \
    >/dev/null 2>&1
  callgrind_annotate --inclusive=yes "$out" 2>/dev/null |
    awk -v f="$c(benchmark" -v n="$N" 'index($0, f) { gsub(",", "", $1); printf "%d\n", $1 / n; exit }'
  rm -f "$out"
}

row() {  # row <case> <condition> <env...>
  c=$1 cond=$2
  shift 2
  d=$(count "$c" direct "$@")
  v=$(count "$c" vgpu "$@")
  printf '%-12s %-44s %8s %8s %+8d\n' "$c" "$cond" "$d" "$v" "$((v - d))"
}

printf '%-12s %-44s %8s %8s %8s\n' case condition direct libvgpu added
row launches "no compute limit" env
row launches "SM_LIMIT=50, policy default, alone" env CUDA_DEVICE_SM_LIMIT=50
row launches "SM_LIMIT=50, policy force (throttled)" env CUDA_DEVICE_SM_LIMIT=50 GPU_CORE_UTILIZATION_POLICY=force
row allocFree "1 MiB alloc + free, memory limit 64g" env
row memGetInfo "memory limit 64g" env
# With more than one visible device the wrapper asks the driver for the current context.
CONF=$W/gpus2.conf row memGetInfo "memory limit 64g, 2 devices visible" env
