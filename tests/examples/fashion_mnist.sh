#!/bin/sh
# Checks of the flagship example with real processes and the real data.
# usage: fashion_mnist.sh CASE EXAMPLE_BINARY DDPRUN
#   accuracy | same_global_batches | resume | errors | local_rank
set -u
case_=$1; bin=$2; ddprun=$3
data=${DDP_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
work=$(mktemp -d "${TMPDIR:-/tmp}/ddp-example.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
need_data() {
  [ -f "$data/train-images-idx3-ubyte.gz" ] || { echo "SKIP: no Fashion-MNIST in $data (apt-get install dataset-fashion-mnist)"; exit 77; }
}
json_field() { # json_field FILE EPOCH FIELD
  grep "\"epoch\":$2," "$1" | sed -n "s/.*\"$3\":\([0-9.eE+-]*\).*/\1/p"
}

case "$case_" in
accuracy)
  need_data
  "$ddprun" --nproc-per-node 2 --no-prefix "$bin" --epochs 1 --limit 6000 --json > "$work/out" 2>&1 || { cat "$work/out"; fail "training failed"; }
  cat "$work/out"
  acc=$(json_field "$work/out" 1 test_acc)
  [ -n "$acc" ] || fail "no JSON line for epoch 1"
  awk -v a="$acc" 'BEGIN { exit !(a > 0.70) }' || fail "test accuracy $acc is not above 0.70"
  echo "ok: accuracy $acc after one epoch on 6000 samples"
  ;;
same_global_batches)
  # 2 ranks x 64 and 1 rank x 128 see the same global batches: same loss, step by step.
  need_data
  "$ddprun" --nproc-per-node 2 "$bin" --epochs 1 --limit 2560 --batch-size 64 --quiet --step-log "$work/two" > "$work/o2" 2>&1 || { cat "$work/o2"; fail "2-rank run failed"; }
  "$ddprun" --nproc-per-node 1 "$bin" --epochs 1 --limit 2560 --batch-size 128 --quiet --step-log "$work/one" > "$work/o1" 2>&1 || { cat "$work/o1"; fail "1-rank run failed"; }
  [ "$(wc -l < "$work/two")" -eq 20 ] || fail "expected 20 steps, got $(wc -l < "$work/two")"
  paste "$work/two" "$work/one" | awk '
    { d = $1 - $2; if (d < 0) d = -d; r = d / ($2 > 0 ? $2 : 1); if (r > worst) worst = r }
    END { printf "worst relative difference %.3g over %d steps\n", worst, NR; exit !(NR == 20 && worst < 1e-4) }' \
    || { paste "$work/two" "$work/one"; fail "the loss curves differ"; }
  ;;
resume)
  # Two epochs, then resume for a third == three epochs straight (constant learning rate).
  need_data
  common="--limit 3000 --lr-schedule constant --json"
  "$ddprun" --nproc-per-node 2 --no-prefix "$bin" --epochs 3 $common > "$work/straight" 2>&1 || { cat "$work/straight"; fail "straight run failed"; }
  "$ddprun" --nproc-per-node 2 --no-prefix "$bin" --epochs 2 $common --checkpoint "$work/ck" > "$work/first" 2>&1 || { cat "$work/first"; fail "first half failed"; }
  [ -f "$work/ck" ] || fail "no checkpoint written"
  [ ! -e "$work/ck.tmp" ] || fail "temporary checkpoint file left behind"
  "$ddprun" --nproc-per-node 2 --no-prefix "$bin" --epochs 3 $common --checkpoint "$work/ck" --resume > "$work/second" 2>&1 || { cat "$work/second"; fail "resumed run failed"; }
  a=$(json_field "$work/straight" 3 train_loss); b=$(json_field "$work/second" 3 train_loss)
  c=$(json_field "$work/straight" 3 test_acc); d=$(json_field "$work/second" 3 test_acc)
  echo "epoch 3 straight: loss $a acc $c; resumed: loss $b acc $d"
  [ -n "$a" ] && [ "$a" = "$b" ] && [ "$c" = "$d" ] || fail "resumed training differs from straight training"
  ;;
errors)
  # Missing data: a clear error naming the file and the package, on every rank, non-zero exit.
  "$ddprun" --nproc-per-node 2 "$bin" --data "$work/nothing" --epochs 1 > "$work/missing" 2>&1 && fail "missing data did not fail"
  cat "$work/missing"
  for r in 0 1; do
    grep -q "^\[$r\] .*$work/nothing/train-images-idx3-ubyte.gz.*dataset-fashion-mnist" "$work/missing" || fail "rank $r did not name the file and the package"
  done
  need_data
  "$ddprun" --nproc-per-node 2 --no-prefix "$bin" --epochs 1 --limit 500 --quiet --checkpoint "$work/ck" > /dev/null 2>&1 || fail "could not write a checkpoint"
  # Flip one byte in the middle: the checksum must catch it on rank 0, and rank 1 must not hang.
  size=$(stat -c %s "$work/ck")
  printf '\377' | dd of="$work/ck" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
  "$ddprun" --nproc-per-node 2 "$bin" --epochs 2 --limit 500 --checkpoint "$work/ck" --resume > "$work/corrupt" 2>&1 && fail "a corrupt checkpoint was accepted"
  cat "$work/corrupt"
  grep -q "^\[0\] .*checksum mismatch" "$work/corrupt" || fail "rank 0 did not report the checksum"
  grep -q "^\[1\] .*rank 0 could not load the checkpoint" "$work/corrupt" || fail "rank 1 did not report it"
  echo "ok: clear errors"
  ;;
local_rank)
  # torch.distributed.launch's --local_rank option (every spelling) is accepted and checked
  # against LOCAL_RANK; the launcher itself: launcher.torch_distributed_launch.example.
  LOCAL_RANK=1 "$bin" --local_rank=0 --epochs 0 > "$work/mismatch" 2>&1
  rc=$?
  cat "$work/mismatch"
  [ $rc -eq 2 ] || fail "a --local_rank that contradicts LOCAL_RANK exited with $rc, not 2"
  grep -q -- "--local_rank=0 but LOCAL_RANK=1" "$work/mismatch" || fail "the mismatch is not named"
  need_data
  for spelling in "--local_rank 0" "--local_rank=0" "--local-rank=0" "--local-rank 0"; do
    LOCAL_RANK=0 "$bin" $spelling --epochs 0 --quiet > "$work/accepted" 2>&1 || { cat "$work/accepted"; fail "'$spelling' was rejected"; }
  done
  echo "ok: --local_rank accepted in every spelling, checked against LOCAL_RANK"
  ;;
*) echo "unknown case $case_"; exit 2 ;;
esac
