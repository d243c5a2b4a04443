#!/usr/bin/env bash
# The LibTorch example's epoch (--limit samples, 2 ranks, one thread each) against
# (i) PyTorch's own DDP in Python training the same CNN with the same batch,
# optimizer, schedule and evaluation, and (ii) LibTorch's c10d ProcessGroupGloo
# with one all-reduce per gradient after backward (C++ without ddp); and ddp at
# 1 rank for the scaling. Runs interleaved, REPEATS times; medians and same-run
# ratios in one JSON line.
#   bench/torch_epoch.sh [BUILD_DIR] [REPEATS] [LIMIT]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
repeats=${2:-3}
limit=${3:-12000}
example=$build/examples/libtorch_fashion_mnist/libtorch_fashion_mnist
c10d=$build/bench/bench_torch_c10d_epoch
[[ -x $example && -x $c10d ]] || { echo "bench/torch_epoch.sh: build libtorch_fashion_mnist and bench_torch_c10d_epoch first (needs libtorch-dev)" >&2; exit 77; }
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "bench/torch_epoch.sh: needs python3-torch" >&2; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { "$build/tools/ddprun" --no-prefix "$@"; }
for _ in $(seq "$repeats"); do
  run --nproc-per-node 2 "$example" --epochs 1 --limit "$limit" --json >> "$tmp/ddp2"
  /usr/bin/python3 "$root/bench/torch_cnn_epoch.py" --ranks 2 --limit "$limit" --port $((20000 + RANDOM % 10000)) >> "$tmp/python2" 2>/dev/null
  run --nproc-per-node 2 "$c10d" --limit "$limit" >> "$tmp/c10d2"
  run --nproc-per-node 1 "$example" --epochs 1 --limit "$limit" --json >> "$tmp/ddp1"
done
median() { sed -n "s/.*\"${2:-epoch_s}\": *\([0-9.]*\).*/\1/p" "$1" | sort -g | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
acc() { sed -n 's/.*"test_acc": *\([0-9.]*\).*/\1/p' "$1" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
d2=$(median "$tmp/ddp2") p2=$(median "$tmp/python2") c2=$(median "$tmp/c10d2") d1=$(median "$tmp/ddp1")
t2=$(median "$tmp/ddp2" train_s) tp=$(median "$tmp/python2" train_s) tc=$(median "$tmp/c10d2" train_s) t1=$(median "$tmp/ddp1" train_s)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
printf '{"case":"torch_epoch","limit":%d,"repeats":%d,"ddp_2_ranks_s":%s,"python_ddp_2_ranks_s":%s,"c10d_per_gradient_2_ranks_s":%s,"ddp_1_rank_s":%s,"speedup_over_python_ddp":%s,"speedup_over_c10d":%s,"scaling_1_to_2":%s,"training_only":{"ddp_2_ranks_s":%s,"python_ddp_2_ranks_s":%s,"c10d_2_ranks_s":%s,"ddp_1_rank_s":%s,"speedup_over_python_ddp":%s,"speedup_over_c10d":%s,"scaling_1_to_2":%s},"test_acc":{"ddp":%s,"python_ddp":%s,"c10d":%s}}\n' \
  "$limit" "$repeats" "$d2" "$p2" "$c2" "$d1" "$(ratio "$p2" "$d2")" "$(ratio "$c2" "$d2")" "$(ratio "$d1" "$d2")" \
  "$t2" "$tp" "$tc" "$t1" "$(ratio "$tp" "$t2")" "$(ratio "$tc" "$t2")" "$(ratio "$t1" "$t2")" \
  "$(acc "$tmp/ddp2")" "$(acc "$tmp/python2")" "$(acc "$tmp/c10d2")"
