#!/bin/sh
# dist.single_process_notice: a program started without a launcher says once on stderr that it
# runs as one process and how to start several; WORLD_SIZE=1, DDP_QUIET_SINGLE=1 or a launcher
# silence it.
#   single_process_notice.sh DDPRUN SCENARIO_WORKER
set -u
ddprun=$1; worker=$2
fail() { echo "FAILED: $*"; exit 1; }
bare() { env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT \
  -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID -u DDP_QUIET_SINGLE -u DDP_STORE_IN_LAUNCHER "$@"; }
line="this job runs as one process (rank 0 of 1): no launcher set RANK and WORLD_SIZE. To start N processes: ddprun --nproc-per-node N <program> \[args...\]"
out=$(bare "$worker" ok 2>&1) || fail "the bare run failed: $out"
echo "$out"
echo "$out" | grep -q "RESULT ok rank=0 size=1" || fail "the bare run did not run as rank 0 of 1"
[ "$(echo "$out" | grep -c "$line")" = 1 ] || fail "no single line saying the job runs as one process"
for quiet in "WORLD_SIZE=1" "DDP_QUIET_SINGLE=1"; do
  out=$(bare env "$quiet" "$worker" ok 2>&1) || fail "the run with $quiet failed: $out"
  echo "$out" | grep -q "runs as one process" && fail "$quiet did not silence it: $out"
done
out=$("$ddprun" --nproc-per-node 1 "$worker" ok 2>&1) || fail "the run under ddprun failed: $out"
echo "$out" | grep -q "runs as one process" && fail "printed under ddprun: $out"
echo ok
