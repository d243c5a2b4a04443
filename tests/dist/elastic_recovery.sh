#!/bin/sh
# dist.elastic.recovery: in-process recovery under ddprun --in-process-recovery. A job of 3
# ranks (ddp::elastic::run, DDP + SGD on a global batch of 6, a commit every 10 steps) loses
# rank 2 to kill -9 after step 30, and again rank 0 (whose successor's commit every survivor
# takes); the two survivors must go on in their own processes (the PIDs they printed at start
# finish the job), in a second generation of world 2, and end with
# the parameters of single-process training (the worker's oracle, 1e-5 relative) and of an
# uninterrupted run at world 3 (TOL below). A worker whose commit claims one step more than
# its parameters hold (a restore that skips a step) must fail both. Without the flag the loss
# ends the job; with --max-restarts it is refused. With sharded_data_parallel and Adam handed
# to the state (state.hold), the survivors match single-process Adam and the uninterrupted run;
# without hold() the restarted moments must fail the oracle, and holding it in the first
# generation only must be refused at the next commit; losing rank 0 with Adam held, the new
# rank 0's gathered state must be whole. hold() of a stepped optimizer and a commit after
# run() returned are refused.
#   elastic_recovery.sh DDPRUN ELASTIC_RECOVERY_WORKER
set -u
ddprun=$1; worker=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/ddp-elastic.XXXXXX")
launcher=
trap '[ -n "$launcher" ] && kill -9 "$launcher" 2>/dev/null; rm -rf "$dir"' EXIT
export DDP_TIMEOUT=60s
# Between the survivors and the uninterrupted run only float summation order differs (a ring
# of 2 against 3, sample weights 3/6 against 2/6): measured up to 1.2e-7 relative; a restore
# that skips a step gives ~1e-2 (docs/elastic.md, In-process recovery).
tol=1e-5
total=120 every=10 step_ms=10
fail() { echo "FAILED: $*"; for f in "$dir"/*.log; do echo "== $f"; cat "$f"; done; exit 1; }

# kill_one NAME VICTIM [--plain] [broken]: the job of 3 (--plain: without --in-process-recovery),
# rank VICTIM killed once rank 0 printed step 30; sets rc.
kill_one() {
  name=$1; target=$2; shift 2
  mkdir -p "$dir/$name"
  log="$dir/$name.log"
  recovery=--in-process-recovery
  [ "${1:-}" = --plain ] && { recovery=; shift; }
  "$ddprun" $recovery --no-prefix --nproc-per-node 3 "$worker" recover "$dir/$name" $total $every $step_ms "$@" \
    >"$log" 2>&1 &
  launcher=$!
  i=0
  until grep -q '^STEP 30 world=3' "$log" 2>/dev/null; do
    i=$((i + 1)); [ $i -le 600 ] || fail "$name: step 30 not reached within 30 s"
    sleep 0.05
  done
  victim=$(sed -n "s/^PID rank=$target pid=\([0-9]*\)\$/\1/p" "$log")
  [ -n "$victim" ] || fail "$name: rank $target printed no PID"
  kill_ns=$(date +%s%N)
  kill -9 "$victim"
  i=0
  while kill -0 "$launcher" 2>/dev/null; do
    i=$((i + 1)); [ $i -le 600 ] || fail "$name: the job did not end within 60 s of the kill"
    sleep 0.1
  done
  wait "$launcher"; rc=$?
  launcher=
}

# survived NAME VICTIM [REF]: the two other ranks finished ok in the processes that started, at
# generation 1 of world 2, and match the uninterrupted run (REF/params.*, default $dir).
survived() {
  name=$1 victim_rank=$2 ref=${3:-$dir}
  [ $rc -eq 0 ] || fail "$name: the job that lost rank $victim_rank exited with $rc"
  for r in 0 1 2; do
    [ $r -eq "$victim_rank" ] && continue
    pid=$(sed -n "s/^PID rank=$r pid=\([0-9]*\)\$/\1/p" "$dir/$name.log")
    grep -q "^RESULT ok job_rank=$r pid=$pid generation=1 world=2 " "$dir/$name.log" ||
      fail "$name: rank $r did not finish ok in its own process ($pid) at generation 1 of world 2"
    d=$("$worker" compare "$dir/$name/params.$r" "$ref/params.$r" | sed -n 's/^DIFF //p')
    echo "$name: rank $r against the uninterrupted run: $d (tolerance $tol)"
    awk -v d="$d" -v t="$tol" 'BEGIN { exit !(d <= t) }' || fail "$name: rank $r differs from the uninterrupted run by $d"
  done
  [ "$(grep -c '^RECOVERED generation=1 world=2 ' "$dir/$name.log")" -eq 2 ] || fail "$name: not both survivors recovered"
  grep -q "^RESULT ok job_rank=$victim_rank" "$dir/$name.log" && fail "$name: the killed rank finished"
  first=$(sed -n 's/^RECOVERED .*first_step_ns=\([0-9]*\)$/\1/p' "$dir/$name.log" | sort -n | head -1)
  echo "RECOVERY_MS $(( (first - kill_ns) / 1000000 )) ($name: kill -9 of rank $victim_rank to the first step of world 2)"
}

out=$("$ddprun" --no-prefix --nproc-per-node 3 "$worker" recover "$dir" $total $every $step_ms 2>&1) ||
  { echo "$out"; fail "the uninterrupted run failed"; }
kill_one kill 2
survived kill 2
# Rank 0 lost: old rank 1 is the new rank 0, whose commit every survivor takes.
kill_one rank0 0
survived rank0 0

# Opt-in: without --in-process-recovery the loss ends the job, as before.
kill_one plain_launch 2 --plain
[ $rc -ne 0 ] || fail "a job without --in-process-recovery survived the loss of a rank"
grep -q '^RECOVERED' "$dir/plain_launch.log" && fail "a job without --in-process-recovery recovered"
"$ddprun" --in-process-recovery --max-restarts 1 --nproc-per-node 1 true >"$dir/refused.log" 2>&1
[ $? -eq 2 ] && grep -q 'goes with neither --max-restarts' "$dir/refused.log" ||
  fail "--in-process-recovery with --max-restarts was not refused"

kill_one broken 2 broken
[ $rc -ne 0 ] || fail "a restore that skips a step passed"
[ "$(grep -c '^RESULT fail job_rank=[01] .*generation=1 world=2 ' "$dir/broken.log")" -eq 2 ] ||
  fail "the survivors of the broken restore did not fail the oracle"
d=$("$worker" compare "$dir/broken/params.0" "$dir/params.0" | sed -n 's/^DIFF //p')
awk -v d="$d" -v t="$tol" 'BEGIN { exit !(d > t) }' || fail "the broken restore is within the tolerance ($d)"
echo "broken restore against the uninterrupted run: $d (must exceed $tol)"

# Adam's moments: held, recovered from the survivors' commits.
mkdir -p "$dir/adam_ref"
out=$("$ddprun" --no-prefix --nproc-per-node 3 "$worker" recover "$dir/adam_ref" $total $every $step_ms adam 2>&1) ||
  { echo "$out"; fail "the uninterrupted Adam run failed"; }
kill_one adam 2 adam
survived adam 2 "$dir/adam_ref"
# Rank 0 lost: the new rank 0's copy of the gathered state (old rank 1's) must be whole too.
kill_one adam_rank0 0 adam
survived adam_rank0 0 "$dir/adam_ref"
# Not held: the survivors' Adam restarts its moments at step 30, and the oracle must see it.
kill_one adam_unheld 2 adam-unheld
[ $rc -ne 0 ] || fail "a recovery that restarted Adam's moments passed"
[ "$(grep -c '^RESULT fail job_rank=[01] .*generation=1 world=2 ' "$dir/adam_unheld.log")" -eq 2 ] ||
  fail "the survivors of the recovery without Adam's state did not fail the oracle"
d=$("$worker" compare "$dir/adam_unheld/params.0" "$dir/adam_ref/params.0" | sed -n 's/^DIFF //p')
awk -v d="$d" -v t="$tol" 'BEGIN { exit !(d > t) }' || fail "restarted moments are within the tolerance ($d)"
echo "Adam without its state against the uninterrupted run: $d (must exceed $tol)"
# Held in generation 0 only: the next generation's first commit refuses to drop the moments.
kill_one adam_once 2 adam-held-once
[ $rc -ne 0 ] || fail "a generation that did not hand its optimizer to the state passed"
grep -q "no optimizer is held now" "$dir/adam_once.log" ||
  fail "a commit without the optimizer after one with it was not refused"
# Misuse of hold(): an optimizer that has stepped, and a commit after run() returned (its
# optimizer is gone), are refused with errors that say so.
"$ddprun" --no-prefix --nproc-per-node 2 "$worker" misuse >"$dir/misuse.log" 2>&1 ||
  fail "misuse: a misuse of hold() was not refused as documented"
[ "$(grep -c '^MISUSE .* refused' "$dir/misuse.log")" -eq 4 ] || fail "misuse: not every rank refused both"
echo "PASSED"
