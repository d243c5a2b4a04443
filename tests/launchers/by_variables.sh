#!/bin/sh
# Starts a job's processes with exactly the variables a cluster launcher sets for them (as its
# source sets them), and checks that every rank joined one group of the expected size over Gloo.
# For launchers not installed here: Kubeflow's training operator, MPICH/Intel MPI's Hydra,
# MVAPICH's mpirun_rsh, PRRTE (PMIx).
# usage: by_variables.sh kubeflow-ddprun|kubeflow-pods|kubeflow-refused|trainjob|mpich|mvapich|pmix DDPRUN WORKER
set -u
mode=$1; ddprun=$2; worker=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/ddp-vars.XXXXXX")
pids=""
watchdog=""
cleanup() {
  for p in $pids $watchdog; do kill "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
# ctest's timeout and ^C: the workers go with the script (the EXIT trap runs on exit only).
trap 'exit 143' TERM HUP
trap 'exit 130' INT
export DDP_TIMEOUT=60s
# A free port outside the ephemeral range, so that no other process's connection takes it meanwhile.
port=$(python3 -c '
import random, socket
for _ in range(200):
    p = random.randrange(20000, 32000)
    try:
        s = socket.socket(); s.bind(("127.0.0.1", p)); s.close(); print(p); break
    except OSError:
        pass
')
# start NAME VAR=VALUE... : one process of the job, with only the launcher's variables added.
start() {
  name=$1; shift
  env "$@" "$worker" ok > "$work/$name.out" 2>&1 &
  pids="$pids $!"
}
world=2
case "$mode" in
  kubeflow-ddprun)
    # PyTorchJob: a master and one worker pod, nprocPerNode 2, each pod's command `ddprun WORKER`.
    world=4
    for pod in 0 1; do
      env DDP_TOKEN=kubeflow-secret MASTER_ADDR=127.0.0.1 PET_MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
        PET_MASTER_PORT="$port" WORLD_SIZE=4 RANK=$pod PET_NODE_RANK=$pod PET_NNODES=2 PET_NPROC_PER_NODE=2 \
        "$ddprun" --no-prefix "$worker" ok > "$work/pod$pod.out" 2>&1 &
      pids="$pids $!"
    done
    ;;
  kubeflow-refused)
    # What ddprun cannot do from PET_*: one exit code and one line that names the variable.
    refused() { # refused EXPECTED VAR=VALUE...
      want=$1; shift
      out=$(env "$@" "$ddprun" "$worker" ok 2>&1); code=$?
      [ $code -eq 2 ] || { echo "FAIL: $* gave exit $code: $out"; exit 1; }
      echo "$out" | grep -qF "$want" || { echo "FAIL: $*: no '$want' in: $out"; exit 1; }
    }
    refused "ddprun: PET_NNODES=1:x must be a number of nodes N" PET_NNODES=1:x PET_NODE_RANK=0
    refused "ddprun: PET_RDZV_BACKEND='etcd'" PET_RDZV_BACKEND=etcd PET_NNODES=1:2
    refused "ddprun: PET_RDZV_ENDPOINT='job-worker-0:http': the port" PET_RDZV_ENDPOINT=job-worker-0:http PET_NNODES=1:2
    refused "ddprun: PET_MAX_RESTARTS='-1' must be a whole number" PET_MAX_RESTARTS=-1 PET_NNODES=1
    refused "ddprun: PET_NPROC_PER_NODE='gpu' must be a whole number" PET_NPROC_PER_NODE=gpu PET_NNODES=1
    refused "from PET_NODE_RANK and PET_NNODES" PET_NODE_RANK=2 PET_NNODES=2
    # The command line wins: a variable behind a given option is not read, not even to refuse it;
    # the operator's default nprocPerNode, auto, leaves ddprun's default.
    for args in "--nnodes 1 --node-rank 0 --nproc-per-node 2" "--nnodes 1 --node-rank 0"; do
      # shellcheck disable=SC2086
      out=$(env PET_NNODES=1:4 PET_NODE_RANK=x PET_NPROC_PER_NODE=auto timeout 60 "$ddprun" $args "$worker" ok 2>&1) ||
        { echo "FAIL: ddprun $args under PET_NNODES=1:4 PET_NPROC_PER_NODE=auto: $out"; exit 1; }
      n=$(echo "$args" | grep -q 'nproc-per-node 2' && echo 2 || echo 1)
      echo "$out" | grep -qF "RESULT ok rank=0 size=$n" || { echo "FAIL: ddprun $args: $out"; exit 1; }
    done
    echo "ok: $mode"
    exit 0
    ;;
  kubeflow-pods)
    # PyTorchJob without nprocPerNode (the operator exports its default, auto): the program is each
    # pod's command.
    for pod in 0 1; do
      start "pod$pod" MASTER_ADDR=127.0.0.1 PET_MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
        PET_MASTER_PORT="$port" WORLD_SIZE=2 RANK=$pod PET_NODE_RANK=$pod PET_NNODES=2 PET_NPROC_PER_NODE=auto
    done
    ;;
  trainjob)
    for pod in 0 1; do
      start "pod$pod" PET_NNODES=2 PET_NPROC_PER_NODE=1 PET_NODE_RANK=$pod PET_MASTER_ADDR=127.0.0.1 \
        PET_MASTER_PORT="$port"
    done
    ;;
  mpich)
    for r in 0 1; do
      start "r$r" PMI_RANK=$r PMI_SIZE=2 PMI_FD=9 MPI_LOCALRANKID=$r MPI_LOCALNRANKS=2 MASTER_PORT="$port"
    done
    ;;
  mvapich)
    for r in 0 1; do
      start "r$r" MV2_COMM_WORLD_RANK=$r MV2_COMM_WORLD_SIZE=2 MV2_COMM_WORLD_LOCAL_RANK=$r \
        MV2_COMM_WORLD_LOCAL_SIZE=2 MASTER_PORT="$port"
    done
    ;;
  pmix)
    # PRRTE's PMIx variables; the sizes are exported by the user (PMIx gives them through its API only).
    # The port derived from the namespace (checked in unit.topology) could be taken: the free one is given.
    for r in 0 1; do
      start "r$r" PMIX_RANK=$r PMIX_NAMESPACE="prterun-test-$port@1" WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 \
        MASTER_PORT="$port"
    done
    ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
# A bounded wait: a worker that hangs is killed (and fails the test) well before ctest's timeout.
(
  sleep 90 &
  nap=$!
  trap 'kill $nap 2>/dev/null; exit 0' TERM
  wait $nap
  echo "FAIL: $mode: a process still ran after 90 s" > "$work/zz-watchdog.out"
  for p in $pids; do kill "$p" 2>/dev/null; done
) > /dev/null 2>&1 &
watchdog=$!
rc=0
for p in $pids; do wait "$p" || rc=1; done
pids=""
kill "$watchdog" 2>/dev/null
wait "$watchdog" 2>/dev/null
watchdog=""
cat "$work"/*.out
[ $rc -eq 0 ] || { echo "FAIL: $mode: a process exited with an error"; exit 1; }
for r in $(seq 0 $((world - 1))); do
  [ "$(cat "$work"/*.out | grep -c "RESULT ok rank=$r size=$world")" -eq 1 ] ||
    { echo "FAIL: $mode: rank $r of $world did not report once"; exit 1; }
done
echo "ok: $mode"
