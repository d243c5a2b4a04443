#!/usr/bin/env bash
# Before/after: runs bench_collectives, bench_grad_sync and one Fashion-MNIST
# epoch (2 ranks) from two build trees, interleaved round by round (the order
# alternating, an even number of rounds: each build runs first in half of them, as
# the second program of a round measured apart from the first) so both see the same
# noisy machine, then prints one JSON line per case with each build's median and
# new/old, and a last line with the verdict: a change keeps new/old <= 1.10 in every
# case but raw Gloo's (the same code in both builds: its rows show the noise).
# Exits 1 when a case is over.
#   bench/compare_builds.sh OLD_BUILD NEW_BUILD [ROUNDS]   (ROUNDS even, default 4)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
old=$1 new=$2 rounds=${3:-4}
if ! [[ $rounds =~ ^[1-9][0-9]*$ ]] || ((rounds % 2)); then
  echo "compare_builds.sh: ROUNDS is $rounds; give an even number, 2 or more (each build runs first in half the rounds)" >&2
  exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run_one() { # build label
  local b=$1 tag=$2 run="$1/tools/ddprun --nproc-per-node 2 --no-prefix"
  $run "$b/bench/bench_collectives" | sed "s/^/$tag /" >> "$tmp/all"
  $run "$b/bench/bench_grad_sync" | sed "s/^/$tag /" >> "$tmp/all"
  $run "$b/examples/fashion_mnist/fashion_mnist" --epochs 1 --json | grep '"epoch_s"' | sed "s/^/$tag /" >> "$tmp/all"
}
for r in $(seq "$rounds"); do
  if (( r % 2 )); then run_one "$old" old; run_one "$new" new; else run_one "$new" new; run_one "$old" old; fi
done
python3 - "$tmp/all" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    tag, _, text = line.partition(" ")
    d = json.loads(text)
    if "epoch_s" in d:
        key, value = "fashion_mnist_epoch", d["epoch_s"]
    elif d.get("case") == "all_reduce":
        # One row per path bench_collectives times (shared memory, in place, TCP); raw Gloo is
        # the same code in both builds: its row shows the machine's noise.
        for path in ("shm", "in_place", "tcp", "raw"):
            if path + "_s" in d:
                rows.setdefault(f"all_reduce/{d['bytes']}/{path}", {"old": [], "new": []})[tag].append(d[path + "_s"])
        continue
    elif "sync_s" in d:
        key, value = f"{d['case']}/{d['policy']}", d["sync_s"]
    elif "step_s" in d:
        key, value = f"{d['case']}/{d['policy']}", d["step_s"]
    else:
        continue
    rows.setdefault(key, {"old": [], "new": []})[tag].append(value)
limit, over, noise = 1.10, [], []
for key, v in rows.items():
    o, n = statistics.median(v["old"]), statistics.median(v["new"])
    print(json.dumps({"case": key, "old_s": round(o, 6), "new_s": round(n, 6), "new_over_old": round(n / o, 3),
                      "runs": len(v["new"])}))
    if key.endswith("/raw"):
        noise.append(round(n / o, 3))
    elif n / o > limit:
        over.append(key)
print(json.dumps({"verdict": "slower" if over else "within limit", "limit": limit, "over": over,
                  "raw_gloo_new_over_old": noise}))
sys.exit(1 if over else 0)
PY
