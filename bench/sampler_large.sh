#!/usr/bin/env bash
# Time and peak memory of one distributed_sampler<shuffled>::indices() call at large n,
# for both torch_randperm versions, each in a fresh process under /usr/bin/time -v.
# One JSON line per run: bench_sampler's own line plus time's elapsed and max RSS.
#   bench/sampler_large.sh [BUILD_DIR] [N] [REPLICAS...]     (defaults: build 1000000000 2 8)
# n = 10^9 needs ~8 GB at 2 replicas (4-byte permutation + 8-byte share of n/2).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
n=${2:-1000000000}
shift $(( $# < 2 ? $# : 2 ))
replicas=("$@")
[[ ${#replicas[@]} -gt 0 ]] || replicas=(2 8)
bin=$build/bench/bench_sampler
[[ -x $bin ]] || { echo "build it first: cmake --build $build --target bench_sampler" >&2; exit 1; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for r in "${replicas[@]}"; do
  for version in since_2_6 before_2_6; do
    line=$(/usr/bin/time -v -o "$log" "$bin" "$n" "$r" "$version")
    rss_kb=$(sed -n 's/.*Maximum resident set size (kbytes): *//p' "$log")
    wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): *//p' "$log")
    printf '%s,"time_max_rss_bytes":%d,"time_wall":"%s"}\n' "${line%\}}" "$((rss_kb * 1024))" "$wall"
  done
done
