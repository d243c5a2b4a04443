#!/bin/sh
# The torch launch recipes of docs/launching.md, run with the real launchers (Debian's python3-torch).
# Exit 77 (ctest: skipped) with the reason where torch is absent (or, for the
# cuda_visible_devices case, where no GPU is; for netns, where `ip netns` is unavailable).
# Runs from the launcher tests in tests/CMakeLists.txt (launcher.<CASE>).
# usage: torch.sh CASE PROGRAM
#   torch_distributed_launch          PROGRAM=scenario_worker: --use_env --no_python, then the
#                                     plain form (it passes --local_rank=N) through a Python stand-in
#   torch_distributed_launch.example  PROGRAM=fashion_mnist: the plain form, --local_rank=N to the example
#   torch_distributed_launch.libtorch_example  the same with PROGRAM=libtorch_fashion_mnist
#   torchrun_static.libtorch_example  PROGRAM=libtorch_fashion_mnist under torchrun's static rendezvous
#   torch_distributed_launch.cuda_visible_devices
#                                     PROGRAM=gpu_nccl: the seed's CUDA_VISIBLE_DEVICES=... launch
#   torchrun_static                   PROGRAM=scenario_worker: --nnodes 1 --node_rank 0 --master_addr
#                                     127.0.0.1 --master_port P
#   torchrun_static.netns             PROGRAM=scenario_worker: the static form on two nodes: two
#                                     network namespaces joined by a veth pair
set -u
case_=$1; prog=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ddp-torch.XXXXXX")
ns0=""; ns1=""; pids=""
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null; done
  [ -n "$ns0" ] && ip netns del "$ns0" 2>/dev/null
  [ -n "$ns1" ] && ip netns del "$ns1" 2>/dev/null
  [ -n "$ns0" ] && ip link del "ddp$$a" 2>/dev/null # when it never reached its namespace
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
export DDP_TIMEOUT=60s
fail() { echo "FAIL: $*"; exit 1; }

# Debian's torch belongs to /usr/bin/python3; a python3 earlier on PATH may lack it.
py=""
for p in /usr/bin/python3 python3; do
  if "$p" -c 'import torch.distributed.run' >/dev/null 2>&1; then py=$p; break; fi
done
[ -n "$py" ] || { echo "SKIP: no python3 with torch (apt-get install python3-torch)"; exit 77; }
torchrun=$(dirname "$(command -v "$py")")/torchrun
[ -x "$torchrun" ] || torchrun=$(command -v torchrun) || { echo "SKIP: torchrun is missing"; exit 77; }

# A random base port P with P and P+1 free (the agent's store, ddp's store), outside the
# ephemeral range so that no connection of another process takes it in between.
free_ports() {
  "$py" - <<'EOF'
import random, socket
for _ in range(200):
    p = random.randrange(20000, 32000, 2)
    try:
        for q in (p, p + 1):
            s = socket.socket(); s.bind(("127.0.0.1", q)); s.close()
    except OSError:
        continue
    print(p); break
EOF
}

# run_launch OUT CMD...: runs CMD (a function below that reads $PORT, set here to a fresh free
# port), again with another port when one was taken meanwhile by someone else (up to 3 tries).
run_launch() {
  out=$1; shift
  for try in 1 2 3; do
    PORT=$(free_ports)
    [ -n "$PORT" ] || fail "no free port pair found"
    "$@" > "$out" 2>&1
    rc=$?
    grep -q "already in use" "$out" || return $rc
    echo "port $PORT was taken meanwhile (try $try), retrying"
  done
  return $rc
}
# Debian's torch 1.13 crashes with the default flags; --log_dir, -r 1 -t 1 work (docs/launching.md).
launch() { timeout 180 "$py" -m torch.distributed.launch --master_port "$PORT" --log_dir "$work/logs" -r 1 -t 1 "$@"; }
static_torchrun() {
  timeout 180 "$torchrun" --nnodes 1 --node_rank 0 --master_addr 127.0.0.1 --master_port "$PORT" \
    --nproc_per_node 2 --log_dir "$work/logs" -r 1 -t 1 --no_python "$@"
}
expect_ok_ranks() { # expect_ok_ranks FILE WORLD
  n=$(grep -c "RESULT ok rank=[0-9]* size=$2" "$1")
  [ "$n" -eq "$2" ] || { cat "$1"; fail "expected $2 ranks of one $2-rank group, saw $n"; }
}

case "$case_" in
torch_distributed_launch)
  # python -m torch.distributed.launch --use_env --no_python --nproc_per_node 2 ./train
  run_launch "$work/env" launch --use_env --no_python --nproc_per_node 2 "$prog" ok
  rc=$?
  cat "$work/env"
  [ $rc -eq 0 ] || fail "torch.distributed.launch --use_env --no_python exited with $rc"
  expect_ok_ranks "$work/env" 2
  grep -q LOCAL_RANK_ARG "$work/env" && fail "--use_env passed --local_rank"
  # python -m torch.distributed.launch --nproc_per_node 2 script.py: the script gets --local_rank=N.
  run_launch "$work/plain" launch --nproc_per_node 2 "$here/exec_program.py" "$prog" ok
  rc=$?
  cat "$work/plain"
  [ $rc -eq 0 ] || fail "torch.distributed.launch (plain form) exited with $rc"
  expect_ok_ranks "$work/plain" 2
  for r in 0 1; do
    grep -q "LOCAL_RANK_ARG $r" "$work/plain" || fail "rank $r did not see --local_rank=$r"
  done
  ;;
torch_distributed_launch.example | torch_distributed_launch.libtorch_example)
  data=${DDP_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
  [ -f "$data/train-images-idx3-ubyte.gz" ] || { echo "SKIP: no Fashion-MNIST in $data (apt-get install dataset-fashion-mnist)"; exit 77; }
  run_launch "$work/out" launch --nproc_per_node 2 "$here/exec_program.py" "$prog" --data "$data" \
    --epochs 1 --limit 1024 --json
  rc=$?
  cat "$work/out"
  [ $rc -eq 0 ] || fail "the example under torch.distributed.launch (plain form) exited with $rc"
  grep -q '"epoch":1,' "$work/out" || fail "no JSON line for epoch 1"
  ;;
torch_distributed_launch.cuda_visible_devices)
  # The seed: CUDA_VISIBLE_DEVICES=0,1,2,3 python -m torch.distributed.launch --nproc_per_node=4 main.py
  # Here with as many ranks as GPUs (at most 4); without a GPU the program checks that
  # NCCL init fails cleanly after the rendezvous (on MASTER_PORT+1), and the case is skipped.
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  [ "$gpus" -gt 4 ] && gpus=4
  n=$gpus; [ "$n" -ge 1 ] || n=1
  visible=$(seq -s, 0 $((n - 1)))
  export CUDA_VISIBLE_DEVICES=$visible
  run_launch "$work/out" launch --use_env --no_python --nproc_per_node "$n" "$prog"
  rc=$?
  cat "$work/out"
  if [ "$gpus" -lt 1 ]; then
    grep -q "SKIP: no CUDA device (init failed cleanly: yes)" "$work/out" || fail "NCCL init did not fail cleanly without a GPU"
    echo "SKIP: no GPU (CUDA_VISIBLE_DEVICES=$visible launch ran; NCCL init failed cleanly)"
    exit 77
  fi
  [ $rc -eq 0 ] || fail "CUDA_VISIBLE_DEVICES=$visible torch.distributed.launch exited with $rc"
  ;;
torchrun_static)
  # torchrun --nnodes 1 --node_rank 0 --master_addr 127.0.0.1 --master_port P --nproc_per_node 2 --no_python ./train
  run_launch "$work/out" static_torchrun "$prog" ok
  rc=$?
  cat "$work/out"
  [ $rc -eq 0 ] || fail "torchrun (static rendezvous) exited with $rc"
  expect_ok_ranks "$work/out" 2
  ;;
torchrun_static.libtorch_example)
  # The LibTorch example under torchrun's static rendezvous; its JSON line lands in torchrun's logs.
  data=${DDP_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
  [ -f "$data/train-images-idx3-ubyte.gz" ] || { echo "SKIP: no Fashion-MNIST in $data (apt-get install dataset-fashion-mnist)"; exit 77; }
  run_launch "$work/out" static_torchrun "$prog" --data "$data" --epochs 1 --limit 1024 --json
  rc=$?
  cat "$work/out"
  [ $rc -eq 0 ] || fail "the LibTorch example under torchrun exited with $rc"
  grep -rq '"epoch":1,' "$work/out" "$work/logs" || fail "no JSON line for epoch 1"
  ;;
torchrun_static.netns)
  # Two nodes: network namespaces joined by a veth pair, 2 ranks each, torchrun's static form.
  command -v ip >/dev/null || { echo "SKIP: ip (iproute2) is missing"; exit 77; }
  ns0=ddp-$$-n0; ns1=ddp-$$-n1
  if ! ip netns add "$ns0" 2>"$work/ip.err"; then
    ns0=""; echo "SKIP: cannot create a network namespace: $(cat "$work/ip.err")"; exit 77
  fi
  ip netns add "$ns1" || fail "ip netns add $ns1"
  ip link add ddp$$a type veth peer name ddp$$b || fail "ip link add veth"
  ip link set ddp$$a netns "$ns0" && ip link set ddp$$b netns "$ns1" || fail "moving the veth ends"
  ip -n "$ns0" addr add 10.213.0.1/24 dev ddp$$a && ip -n "$ns1" addr add 10.213.0.2/24 dev ddp$$b \
    && ip -n "$ns0" link set ddp$$a up && ip -n "$ns1" link set ddp$$b up \
    && ip -n "$ns0" link set lo up && ip -n "$ns1" link set lo up || fail "configuring the veth pair"
  # Fresh namespaces: every port is free, so a fixed one is safe. One job token for both nodes.
  DDP_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n'); export DDP_TOKEN
  for node in 0 1; do
    eval ns=\$ns$node
    timeout 180 ip netns exec "$ns" "$torchrun" --nnodes 2 --node_rank $node --master_addr 10.213.0.1 --master_port 29500 \
      --nproc_per_node 2 --log_dir "$work/logs$node" -r 1 -t 1 --no_python "$prog" ok > "$work/out$node" 2>&1 &
    pids="$pids $!"
  done
  rc=0
  for p in $pids; do
    wait "$p" || rc=1
  done
  pids=""
  cat "$work/out0" "$work/out1" > "$work/out"
  cat "$work/out"
  [ $rc -eq 0 ] || fail "torchrun on the two namespace nodes failed"
  expect_ok_ranks "$work/out" 4
  ;;
*) echo "unknown case $case_"; exit 2 ;;
esac
echo "ok: $case_"
