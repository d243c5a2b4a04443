#!/bin/sh
# dist.elastic.join: a process joins a running in-process-recovery job and receives its state.
# Under ddprun --in-process-recovery --nproc-per-node 3, ranks 0 and 1 start the job at world 2
# (ddp::elastic::run with admit_joiners; sharded_data_parallel and Adam held by the state, a
# global batch of 6, a commit every 10 steps) and rank 2, with other initial values, asks to join
# 300 ms later. The three must meet after a commit inside the run (generation 1 of world 3, the
# joiner's Adam at the survivors' step count) and all end within 1e-5 of single-process Adam on
# the same global batches (the worker's oracle).
#   elastic_join.sh DDPRUN ELASTIC_RECOVERY_WORKER
set -u
ddprun=$1; worker=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/ddp-elastic-join.XXXXXX")
trap 'rm -rf "$dir"' EXIT
export DDP_TIMEOUT=60s
total=120 every=10 step_ms=10
fail() { echo "FAILED: $*"; cat "$dir/join.log"; exit 1; }

"$ddprun" --in-process-recovery --no-prefix --nproc-per-node 3 "$worker" join "$dir" $total $every $step_ms \
  >"$dir/join.log" 2>&1 || fail "the job with a joiner exited with $?"
for r in 0 1 2; do
  pid=$(sed -n "s/^PID rank=$r pid=\([0-9]*\)\$/\1/p" "$dir/join.log")
  grep -q "^RESULT ok job_rank=$r pid=$pid generation=1 world=3 " "$dir/join.log" ||
    fail "rank $r did not finish ok in its own process ($pid) at generation 1 of world 3"
done
from=$(sed -n 's/^RECOVERED generation=1 world=3 rank=2 from_step=\([0-9]*\) adam_steps=\([0-9]*\) .*/\1 \2/p' \
  "$dir/join.log")
set -- $from
[ $# -eq 2 ] || fail "the joiner printed no first step of generation 1"
[ "$1" -gt 0 ] && [ "$1" -lt $total ] && [ $(($1 % every)) -eq 0 ] ||
  fail "the joiner joined at step $1, not at a commit inside the run"
[ "$2" -eq $(($1 + 1)) ] || fail "the joiner's Adam is at step $2 after its first step from $1"
echo "joined at the commit of step $1; $(grep -c '^RESULT ok' "$dir/join.log") ranks match the oracle"
grep '^RESULT' "$dir/join.log"
echo "PASSED"
