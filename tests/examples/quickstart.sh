#!/bin/sh
# The quick start's programs (examples/quickstart) at WORLD ranks under ddprun:
# - all_reduce: the sum is right on every rank (the program checks it);
# - train: fits y = 2x - 1 (the program checks it), every rank prints the very same parameters,
#   and after the first epoch they equal one process's with a batch WORLD times as large (the
#   ranks' batches together are that batch: ddp's sampler deals indices round robin, as PyTorch's
#   does), to float rounding. A rank that skipped synchronize() fails the last two.
# usage: quickstart.sh DDPRUN WORLD ALL_REDUCE TRAIN
set -eu
ddprun=$1 world=$2 all_reduce=$3 train=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$ddprun" --nproc-per-node "$world" --no-prefix "$all_reduce" > "$dir/sum"
cat "$dir/sum"
[ "$(grep -c "of $world: " "$dir/sum")" -eq "$world" ] || { echo "FAIL: expected $world lines from all_reduce"; exit 1; }
"$ddprun" --nproc-per-node "$world" --no-prefix "$train" 32 > "$dir/ranks"
"$ddprun" --nproc-per-node 1 --no-prefix "$train" $((32 * world)) > "$dir/one"
cat "$dir/ranks" "$dir/one"
for epoch in 1 60; do
  [ "$(grep -c "of $world: epoch $epoch: " "$dir/ranks")" -eq "$world" ] || { echo "FAIL: expected $world lines for epoch $epoch"; exit 1; }
  distinct=$(grep "epoch $epoch: " "$dir/ranks" | sed 's/^rank [0-9]* of [0-9]*: //' | sort -u | wc -l)
  [ "$distinct" -eq 1 ] || { echo "FAIL: the ranks' parameters differ after epoch $epoch"; exit 1; }
done
python3 - "$dir/ranks" "$dir/one" <<'PY'
import re, sys
def first_epoch(path):
    line = next(l for l in open(path) if "epoch 1: " in l)
    return [float(v) for v in re.findall(r"= (\S+?),?(?: |$)", line.strip())]
a, b = first_epoch(sys.argv[1]), first_epoch(sys.argv[2])
ok = len(a) == 2 and all(abs(u - v) <= 1e-5 * max(1.0, abs(v)) for u, v in zip(a, b))
print(("ok" if ok else "FAIL") + f": after epoch 1, {a} on the ranks, {b} in one process")
sys.exit(0 if ok else 1)
PY
