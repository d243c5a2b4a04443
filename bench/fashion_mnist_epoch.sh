#!/usr/bin/env bash
# Seconds per epoch of the Fashion-MNIST example at 2 ranks, against PyTorch 1.13
# DDP doing the same training on this machine, measured in the same run.
# Both train one epoch (the cosine schedule over that epoch) so accuracies compare;
# ddp runs REPEATS times for a median. One JSON line.
#   bench/fashion_mnist_epoch.sh [BUILD_DIR] [REPEATS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
repeats=${2:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for _ in $(seq "$repeats"); do
  "$build/tools/ddprun" --nproc-per-node 2 --no-prefix "$build/examples/fashion_mnist/fashion_mnist" \
    --epochs 1 --json >> "$tmp/ddp.json"
done
torch_s=null torch_acc=null
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  /usr/bin/python3 "$root/bench/torch_fashion_mnist.py" --epochs 1 --ranks 2 \
    --port $((20000 + RANDOM % 10000)) > "$tmp/torch.json" 2>/dev/null
  torch_s=$(sed -n 's/.*"epoch_s": *\([0-9.]*\).*/\1/p' "$tmp/torch.json" | head -n1)
  torch_acc=$(sed -n 's/.*"test_acc": *\([0-9.]*\).*/\1/p' "$tmp/torch.json" | head -n1)
fi
field() { sed -n "s/.*\"$1\": *\([0-9.]*\).*/\1/p" "$2"; }
median=$(field epoch_s "$tmp/ddp.json" | sort -g | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
acc=$(field test_acc "$tmp/ddp.json" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
speedup=null
[[ "$torch_s" != null ]] && speedup=$(awk -v t="$torch_s" -v d="$median" 'BEGIN { printf "%.2f", t / d }')
printf '{"case":"fashion_mnist_epoch","ranks":2,"repeats":%d,"ddp_epoch_s":%s,"ddp_test_acc":%s,"torch_epoch_s":%s,"torch_test_acc":%s,"speedup":%s}\n' \
  "$repeats" "$median" "$acc" "$torch_s" "$torch_acc" "$speedup"
