#!/bin/sh
# Checks of the CUDA example. Without a CUDA device every case but `args` exits 77 (skipped),
# passing on the example's own SKIP line; `args` runs anywhere (options are refused before CUDA).
# usage: fashion_mnist_cuda.sh CASE EXAMPLE_BINARY DDPRUN [CPU_EXAMPLE_BINARY]
#   args | nccl_ddp | nccl_all_reduce | gloo_ddp | gloo_all_reduce | matches_cpu
# DDP_CUDA_BUCKETING picks --bucketing for the ddp cases (default: the example's, size_capped).
set -u
case_=$1; bin=$2; ddprun=$3; cpu=${4:-}
data=${DDP_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
bucketing=${DDP_CUDA_BUCKETING:-size_capped}
work=$(mktemp -d "${TMPDIR:-/tmp}/ddp-example-cuda.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
need_data() {
  [ -f "$data/train-images-idx3-ubyte.gz" ] || { echo "SKIP: no Fashion-MNIST in $data (apt-get install dataset-fashion-mnist)"; exit 77; }
}
# run_or_skip OUT CMD...: runs CMD; exit 77 (skipped) passes the example's reason through.
run_or_skip() {
  out=$1; shift
  "$@" > "$out" 2>&1
  rc=$?
  cat "$out"
  if [ $rc -eq 77 ]; then
    grep -q "SKIP: fashion_mnist_cuda needs a CUDA device" "$out" || fail "exit 77 without the example's SKIP line"
    exit 77
  fi
  [ $rc -eq 0 ] || fail "$* exited with $rc"
}
json_field() { # json_field FILE EPOCH FIELD
  grep "\"epoch\":$2," "$1" | sed -n "s/.*\"$3\":\([0-9.eE+-]*\).*/\1/p"
}
accuracy_above() { # accuracy_above FILE MIN
  acc=$(json_field "$1" 1 test_acc)
  [ -n "$acc" ] || fail "no JSON line for epoch 1"
  awk -v a="$acc" -v m="$2" 'BEGIN { exit !(a > m) }' || fail "test accuracy $acc is not above $2"
  echo "ok: accuracy $acc after one epoch"
}

case "$case_" in
args)
  # Refused by the option parser, naming the option, before CUDA is touched (so also without a GPU).
  for bad in "--lr nan" "--momentum 1.5" "--limit -1" "--epochs 2.5" "--batch-size 0" "--backend mpi" \
             "--bucketing fastest" "--grad-sync none"; do
    "$bin" $bad --epochs 0 > "$work/flag" 2>&1
    rc=$?
    cat "$work/flag"
    [ $rc -ne 0 ] && [ $rc -ne 77 ] || fail "'$bad' exited with $rc"
    grep -q -- "^${bad%% *}: " "$work/flag" || fail "'$bad': the option is not named"
  done
  echo "ok: bad options refused before CUDA"
  ;;
nccl_ddp)
  need_data
  run_or_skip "$work/out" "$ddprun" --nproc-per-node 1 --no-prefix "$bin" --backend nccl --bucketing "$bucketing" \
    --data "$data" --epochs 1 --limit 6000 --json
  accuracy_above "$work/out" 0.70
  ;;
nccl_all_reduce)
  need_data
  run_or_skip "$work/out" "$ddprun" --nproc-per-node 1 --no-prefix "$bin" --backend nccl --grad-sync all_reduce \
    --data "$data" --epochs 1 --limit 6000 --json
  accuracy_above "$work/out" 0.70
  ;;
gloo_ddp)
  # Two ranks sharing the GPU(s) over Gloo: device gradients staged through host memory.
  need_data
  run_or_skip "$work/out" "$ddprun" --nproc-per-node 2 --no-prefix "$bin" --backend gloo --bucketing "$bucketing" \
    --data "$data" --epochs 1 --limit 6000 --json
  accuracy_above "$work/out" 0.70
  ;;
gloo_all_reduce)
  # Two ranks sharing the GPU(s), one blocking process_group<gloo> all-reduce per device
  # gradient: staged through pinned host memory by process_group itself.
  need_data
  run_or_skip "$work/out" "$ddprun" --nproc-per-node 2 --no-prefix "$bin" --backend gloo --grad-sync all_reduce \
    --data "$data" --epochs 1 --limit 6000 --json
  accuracy_above "$work/out" 0.70
  ;;
matches_cpu)
  # One rank each, same seed (same initial weights, same shuffle), same batches: the GPU's loss
  # curve is the CPU example's, step by step, to float rounding.
  need_data
  [ -n "$cpu" ] || fail "matches_cpu needs the CPU example's binary"
  run_or_skip "$work/o_gpu" "$ddprun" --nproc-per-node 1 "$bin" --backend nccl --grad-sync all_reduce \
    --data "$data" --epochs 1 --limit 1280 --quiet --step-log "$work/gpu"
  "$ddprun" --nproc-per-node 1 "$cpu" --data "$data" --epochs 1 --limit 1280 --quiet --step-log "$work/cpu" > "$work/o_cpu" 2>&1 ||
    { cat "$work/o_cpu"; fail "CPU run failed"; }
  [ "$(wc -l < "$work/gpu")" -eq 20 ] || fail "expected 20 steps, got $(wc -l < "$work/gpu")"
  # The CPU example's lines are "<global step> <loss>": compare the losses.
  awk '{ print $NF }' "$work/gpu" > "$work/gpu.loss"; awk '{ print $NF }' "$work/cpu" > "$work/cpu.loss"
  paste "$work/gpu.loss" "$work/cpu.loss" | awk '
    { d = $1 - $2; if (d < 0) d = -d; r = d / ($2 > 0 ? $2 : 1); if (r > worst) worst = r }
    END { printf "worst relative difference %.3g over %d steps\n", worst, NR; exit !(NR == 20 && worst < 1e-3) }' \
    || { paste "$work/gpu" "$work/cpu"; fail "the GPU and CPU loss curves differ"; }
  ;;
*) echo "unknown case $case_"; exit 2 ;;
esac
