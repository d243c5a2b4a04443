#!/usr/bin/env bash
# What the timeline (DDP_TRACE) costs: one Fashion-MNIST epoch at 2 ranks with
# tracing off and on, and with the probes compiled out (DDP_TRACE_DISABLED,
# target fashion_mnist_notrace, built here when missing), interleaved round by
# round in one run (the order rotating); medians, and every run's time. End to
# end, the noise of this shared machine is larger than the cost, so it also
# reports the cost from bench_trace (CPU ns per probe, off and on) times the
# events each step records. One JSON line.
#   bench/trace_overhead.sh [BUILD_DIR] [ROUNDS] [LIMIT]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
rounds=${2:-5}
limit=${3:-0}
# fashion_mnist_notrace is header-only (its ABI namespace differs from ddp::runtime's): so must
# fashion_mnist be, or the comparison measures the build's form as well as the probes.
if grep -q '^DDP_BUILD_COMPILED_ONCE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "trace_overhead.sh: $build links the examples to ddp::runtime (DDP_BUILD_COMPILED_ONCE=ON, as" \
       "scripts/test configures it): use a build configured without it" >&2
  exit 2
fi
cmake --build "$build" --target fashion_mnist fashion_mnist_notrace bench_trace ddprun > /dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { # label binary [env...]
  local label=$1 bin=$2
  shift 2
  env "$@" "$build/tools/ddprun" --nproc-per-node 2 --no-prefix "$build/examples/fashion_mnist/$bin" \
    --epochs 1 --limit "$limit" --json | grep '"epoch_s"' | sed "s/^/$label /" >> "$tmp/epochs"
}
for r in $(seq "$rounds"); do
  rm -rf "$tmp/tl"
  all=(off on compiled_out) # each round starts one further along: no variant always runs first
  order=("${all[@]:r%3}" "${all[@]:0:r%3}")
  for label in "${order[@]}"; do
    case $label in
    off) run off fashion_mnist ;;
    on) run on fashion_mnist DDP_TRACE="$tmp/tl" ;;
    compiled_out) run compiled_out fashion_mnist_notrace ;;
    esac
  done
done
"$build/bench/bench_trace" > "$tmp/probe"
python3 - "$tmp/epochs" "$tmp/probe" "$tmp/tl" "$rounds" <<'PY'
import json, statistics, sys
epochs, probe, tl, rounds = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3], int(sys.argv[4])
t = {}
for line in open(epochs):
    label, _, text = line.partition(" ")
    t.setdefault(label, []).append(json.loads(text)["epoch_s"])
med = {k: statistics.median(v) for k, v in t.items()}
# Events per step on rank 0 (every thread), from the last traced epoch.
ev = [e for e in json.load(open(f"{tl}/rank_0.json"))["traceEvents"] if e["ph"] != "M"]
steps = sum(e["name"] == "synchronize" for e in ev)
per_step = len(ev) / steps
step_s = med["off"] / steps
# Upper bound: every event priced as a span (two clock reads and a store).
on_pct = 100 * per_step * probe["on_span_ns"] * 1e-9 / step_s
off_pct = 100 * per_step * probe["off_span_ns"] * 1e-9 / step_s
print(json.dumps({
    "case": "trace_overhead", "ranks": 2, "rounds": rounds, "steps": steps,
    "epoch_s_off": round(med["off"], 4), "epoch_s_on": round(med["on"], 4),
    "epoch_s_compiled_out": round(med["compiled_out"], 4),
    "on_over_off": round(med["on"] / med["off"], 3), "off_over_compiled_out": round(med["off"] / med["compiled_out"], 3),
    "runs": {k: [round(x, 3) for x in v] for k, v in t.items()},
    "events_per_step": round(per_step, 1), "probe_on_ns": probe["on_span_ns"], "probe_off_ns": probe["off_span_ns"],
    "cost_on_pct_of_step": round(on_pct, 4), "cost_off_pct_of_step": round(off_pct, 5)}))
PY
