#!/usr/bin/env bash
# Scaling of the Fashion-MNIST example on this host: one epoch at 1, 2 and 4
# ranks, 64 samples per rank per step (as PyTorch was measured in issue 13),
# interleaved round by round in one run; median epoch time, speedup over 1
# rank, median test accuracy. The environment passes through to the ranks
# (e.g. OMP_NUM_THREADS=1 bench/fashion_mnist_scaling.sh). One JSON line.
#
# The ceiling: for each N > 1 the same rounds also run N independent 1-rank jobs at
# once, each on 60000/N samples (--limit): the work of N ranks with no communication
# at all. The slowest of them bounds what N ranks could reach on this host
# ("ceiling_speedup"); the gap between it and "speedup" is what ddp costs. (Each
# independent job scores the whole test set where a rank scores 1/N of it: ~3 % of an
# epoch at N = 2, which makes the ceiling that much lower.)
#   bench/fashion_mnist_scaling.sh [BUILD_DIR] [ROUNDS] [RANKS...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
rounds=${2:-3}
shift $(($# > 2 ? 2 : $#))
ranks=("$@")
((${#ranks[@]})) || ranks=(1 2 4)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "$rounds"); do
  order=("${ranks[@]}")
  (( r % 2 )) || order=($(printf '%s\n' "${ranks[@]}" | tac))
  for n in "${order[@]}"; do
    "$build/tools/ddprun" --nproc-per-node "$n" --no-prefix "$build/examples/fashion_mnist/fashion_mnist" \
      --epochs 1 --batch-size 64 --json | grep '"epoch_s"' | sed "s/^/$n /" >> "$tmp/epochs"
    ((n > 1)) || continue
    pids=()
    for k in $(seq "$n"); do
      "$build/tools/ddprun" --nproc-per-node 1 --no-prefix --master-port $((29400 + k)) \
        "$build/examples/fashion_mnist/fashion_mnist" --epochs 1 --batch-size 64 --limit $((60000 / n)) \
        --json | grep '"epoch_s"' > "$tmp/alone.$n.$k" &
      pids+=($!)
    done
    wait "${pids[@]}"
    cat "$tmp"/alone.$n.* | python3 -c 'import json,sys; print(max(json.loads(l)["epoch_s"] for l in sys.stdin))' \
      | sed "s/^/$n /" >> "$tmp/alone"
  done
done
python3 - "$tmp/epochs" "$rounds" "${OMP_NUM_THREADS:-unset}" "$tmp/alone" <<'PY'
import json, os, statistics, sys
alone = {}
if os.path.exists(sys.argv[4]):
    for line in open(sys.argv[4]):
        n, t = line.split()
        alone.setdefault(int(n), []).append(float(t))
rows = {}
for line in open(sys.argv[1]):
    n, _, text = line.partition(" ")
    rows.setdefault(int(n), []).append(json.loads(text))
base = statistics.median(d["epoch_s"] for d in rows[min(rows)]) if rows else None
out = {}
for n in sorted(rows):
    t = statistics.median(d["epoch_s"] for d in rows[n])
    out[str(n)] = {"epoch_s": round(t, 4), "speedup": round(base / t, 3),
                   "test_acc": round(statistics.median(d["test_acc"] for d in rows[n]), 4),
                   "runs": [round(d["epoch_s"], 3) for d in rows[n]]}
    if n in alone:
        a = statistics.median(alone[n])
        out[str(n)].update({"independent_epoch_s": round(a, 4), "ceiling_speedup": round(base / a, 3),
                            "independent_runs": [round(x, 3) for x in alone[n]]})
print(json.dumps({"case": "fashion_mnist_scaling", "batch_per_rank": 64, "rounds": int(sys.argv[2]),
                  "omp_num_threads": sys.argv[3], "speedup_over": min(rows), "ranks": out}))
PY
