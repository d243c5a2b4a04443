#!/bin/sh
# ddprun --max-restarts N with a job that fails in every round: its ranks are started N+1 times
# (DDP_RESTART_ROUND 0..N, the store in ddprun), then ddprun exits with the last failure's code.
# Without --max-restarts, the first failure ends the job as before.
# usage: ddprun_restarts.sh DDPRUN
set -u
ddprun=$1
out=$(mktemp "${TMPDIR:-/tmp}/ddprun-restarts.XXXXXX")
trap 'rm -f "$out"' EXIT
# A signal (ctest's timeout, ^C, scripts/test stopping its waiting tests) runs the EXIT trap too.
trap 'exit 143' TERM HUP
trap 'exit 130' INT
fail() { echo "FAIL: $*"; exit 1; }
# Rank 1 fails with 40 + round; rank 0 would run on, so ddprun must stop it each round.
job='echo "started round $DDP_RESTART_ROUND store_in_launcher=$DDP_STORE_IN_LAUNCHER"
     if [ "$RANK" = 1 ]; then exit $((40 + DDP_RESTART_ROUND)); fi; sleep 30'

start=$(date +%s)
"$ddprun" --nproc-per-node 2 --max-restarts 2 --grace-period 1 sh -c "$job" > "$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 42 ] || fail "ddprun exited with $rc, not 42 (the failure of the last round, 2)"
for round in 0 1 2; do
  for rank in 0 1; do
    grep -q "^\[$rank\] started round $round store_in_launcher=1\$" "$out" || fail "rank $rank did not start in round $round"
  done
done
! grep -q "started round 3" "$out" || fail "a fourth round was started"
grep -q -- "--max-restarts 2 are spent (ddprun exits with 42)" "$out" || fail "no final message"
echo "ok: 3 rounds, exit 42, in $(( $(date +%s) - start )) s"

"$ddprun" --nproc-per-node 2 --grace-period 1 sh -c "$job" > "$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 40 ] || fail "without --max-restarts: exit $rc, not 40"
! grep -q "started round 1" "$out" || fail "restarted without --max-restarts"
echo "ok: no restart without --max-restarts"
