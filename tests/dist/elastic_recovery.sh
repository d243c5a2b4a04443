#!/bin/sh
# dist.elastic.recovery: in-process recovery under ddprun --in-process-recovery. A job of 3
# ranks (ddp::elastic::run, DDP + SGD on a global batch of 6, a commit every 10 steps) loses
# rank 2 to kill -9 after step 30, and again rank 0 (whose successor's commit every survivor
# takes); the two survivors must go on in their own processes (the PIDs they printed at start
# finish the job), in a second generation of world 2, and end with
# the parameters of single-process training (the worker's oracle, 1e-5 relative) and of an
# uninterrupted run at world 3 (TOL below). A worker whose commit claims one step more than
# its parameters hold (a restore that skips a step) must fail both. The survivors must resume
# from the last commit before the kill, not an older one. A survivor busy 2.5 s outside
# collectives (last_call 1 s) is waited for, not left out. A second loss in generation 1 leaves
# rank 0 alone in generation 2 (from step 60 or later); with max_recoveries 1 it ends the job. ddprun must stop the job when a rank
# is stopped (SIGSTOP) or stuck in user code and the others gave up (DDP_TIMEOUT=2s): within
# the grace period, or 2 x DDP_TIMEOUT + 10 s. Without the flag the loss ends the job; with
# --nnodes MIN:MAX it is refused (--max-restarts starts joiners: elastic_join.sh). With sharded_data_parallel and Adam handed to the
# state (state.hold), the survivors match single-process Adam and the uninterrupted run (rank 2
# lost, then rank 0: the new rank 0's gathered state must be whole); without hold() the
# restarted moments must fail the oracle, and holding it in the first generation only must be
# refused at the next commit. hold() of a stepped optimizer and a commit after run() returned
# are refused.
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
# rank VICTIM sent $sig (-9) once the log matches $trigger (rank 0 printed step 30); sets rc,
# and last_step: the last step rank 0 printed before the signal.
trigger='^STEP 30 world=3' sig=-9 patience=600 ddprun_flags=
kill_one() {
  name=$1; target=$2; shift 2
  mkdir -p "$dir/$name"
  log="$dir/$name.log"
  recovery=--in-process-recovery
  [ "${1:-}" = --plain ] && { recovery=; shift; }
  "$ddprun" $recovery $ddprun_flags --no-prefix --nproc-per-node 3 "$worker" recover "$dir/$name" $total $every $step_ms "$@" \
    >"$log" 2>&1 &
  launcher=$!
  i=0
  until grep -q "$trigger" "$log" 2>/dev/null; do
    i=$((i + 1)); [ $i -le 600 ] || fail "$name: '$trigger' not seen within 30 s"
    sleep 0.05
  done
  victim=$(sed -n "s/^PID rank=$target pid=\([0-9]*\)\$/\1/p" "$log")
  [ -n "$victim" ] || fail "$name: rank $target printed no PID"
  last_step=$(sed -n 's/^STEP \([0-9]*\) world=3$/\1/p' "$log" | tail -1)
  kill_ns=$(date +%s%N)
  kill $sig "$victim" || fail "$name: rank $target had ended before the signal (a loaded machine: rerun)"
  i=0
  while kill -0 "$launcher" 2>/dev/null; do
    i=$((i + 1)); [ $i -le $patience ] || fail "$name: the job did not end within $((patience / 10)) s of the signal"
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
  # From the last commit before the kill (or a later one), never an older one.
  for f in $(sed -n 's/^RECOVERED .*from_step=\([0-9]*\) .*/\1/p' "$dir/$name.log"); do
    [ "$f" -ge "$last_step" ] || fail "$name: resumed from step $f, older than the last commit before the kill ($last_step)"
  done
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

# second_loss NAME: rank 2 killed after step 30, then job rank 1 once world 2 printed step 60:
# rank 0 goes on alone (generation 2, world 1) from a commit at or after step 60; sets rc.
second_loss() {
  name=$1
  mkdir -p "$dir/$name"
  log="$dir/$name.log"
  "$ddprun" --in-process-recovery --no-prefix --nproc-per-node 3 "$worker" recover "$dir/$name" $total $every $step_ms \
    >"$log" 2>&1 &
  launcher=$!
  for stage in '30 3 2' '60 2 1'; do
    set -- $stage
    i=0
    until grep -q "^STEP $1 world=$2\$" "$log" 2>/dev/null; do
      i=$((i + 1)); [ $i -le 600 ] || fail "$name: step $1 of world $2 not seen within 30 s"
      sleep 0.05
    done
    victim=$(sed -n "s/^PID rank=$3 pid=\([0-9]*\)\$/\1/p" "$log")
    kill -9 "$victim" || fail "$name: rank $3 had ended before the kill (a loaded machine: rerun)"
  done
  i=0
  while kill -0 "$launcher" 2>/dev/null; do
    i=$((i + 1)); [ $i -le 600 ] || fail "$name: the job did not end within 60 s of the second kill"
    sleep 0.1
  done
  wait "$launcher"; rc=$?
  launcher=
}
second_loss twice
[ $rc -eq 0 ] || fail "twice: the job that lost two ranks, one per generation, exited with $rc"
pid=$(sed -n 's/^PID rank=0 pid=\([0-9]*\)$/\1/p' "$dir/twice.log")
grep -q "^RESULT ok job_rank=0 pid=$pid generation=2 world=1 " "$dir/twice.log" ||
  fail "twice: rank 0 did not finish ok in its own process at generation 2 of world 1"
f=$(sed -n 's/^RECOVERED generation=2 .*from_step=\([0-9]*\) .*/\1/p' "$dir/twice.log")
[ -n "$f" ] && [ "$f" -ge 60 ] || fail "twice: generation 2 resumed from step '$f', before the commit of step 60"
d=$("$worker" compare "$dir/twice/params.0" "$dir/params.0" | sed -n 's/^DIFF //p')
awk -v d="$d" -v t="$tol" 'BEGIN { exit !(d <= t) }' || fail "twice: rank 0 differs from the uninterrupted run by $d"
echo "twice: rank 0 against the uninterrupted run: $d (tolerance $tol)"
# max_recoveries 1: the second loss ends the job.
export ELASTIC_MAX_RECOVERIES=1
second_loss capped
unset ELASTIC_MAX_RECOVERIES
[ $rc -ne 0 ] || fail "capped: a second loss past max_recoveries 1 did not end the job"
grep -q '^RESULT ok' "$dir/capped.log" && fail "capped: a rank finished past max_recoveries"
grep -q '^RECOVERED generation=2' "$dir/capped.log" && fail "capped: a second recovery past max_recoveries 1"

# A survivor busy outside collectives (rank 0, 2.5 s after its commit of step 30) while rank 2
# dies is waited for, though the last call (1 s) passes: the store knows it is alive.
trigger='^PAUSED rank=0 step=30'
export ELASTIC_PAUSE=0:30:2500 ELASTIC_LAST_CALL_MS=1000
kill_one busy 2
unset ELASTIC_PAUSE ELASTIC_LAST_CALL_MS
survived busy 2

# A rank stopped (SIGSTOP): the others time out (not peer_lost) and exit 1; ddprun must stop it.
trigger='^STEP 30 world=3' sig=-STOP patience=300 ddprun_flags='--grace-period 1'
export DDP_TIMEOUT=2s
start=$(date +%s)
kill_one stopped 2
[ $rc -ne 0 ] || fail "stopped: the job whose rank 2 was stopped exited 0"
grep -q 'stopping the other ranks (--in-process-recovery)' "$dir/stopped.log" || fail "stopped: ddprun did not stop the ranks"
echo "stopped: ddprun ended $(( $(date +%s) - start )) s after the start, with $rc"
# A rank stopped (SIGSTOP) and another killed: rank 0's generation of its own leaves the stopped
# rank out, and ddprun must end that rank (it takes no SIGTERM while stopped) rather than wait
# for it for ever; rank 0 finishes alone and the job succeeds.
name=left_out
mkdir -p "$dir/$name"
log="$dir/$name.log"
"$ddprun" --in-process-recovery --grace-period 1 --no-prefix --nproc-per-node 3 "$worker" recover "$dir/$name" \
  $total $every $step_ms >"$log" 2>&1 &
launcher=$!
i=0
until grep -q '^STEP 30 world=3$' "$log" 2>/dev/null; do
  i=$((i + 1)); [ $i -le 600 ] || fail "$name: step 30 not seen within 30 s"
  sleep 0.05
done
stopped=$(sed -n 's/^PID rank=2 pid=\([0-9]*\)$/\1/p' "$log")
killed=$(sed -n 's/^PID rank=1 pid=\([0-9]*\)$/\1/p' "$log")
kill -STOP "$stopped" && kill -9 "$killed" || fail "$name: ranks 1 and 2 had ended before the signals (rerun)"
i=0
while kill -0 "$launcher" 2>/dev/null; do
  i=$((i + 1)); [ $i -le 300 ] || { kill -9 "$stopped"; fail "$name: the job did not end within 30 s of the signals"; }
  sleep 0.1
done
wait "$launcher"; rc=$?
launcher=
[ $rc -eq 0 ] || fail "$name: the job whose rank 0 finished alone exited with $rc"
grep -q 'rank 2 (pid [0-9]*) is stopped and not in the survivors' "$log" || fail "$name: ddprun did not end the stopped rank"
grep -q '^RESULT ok job_rank=0 .* world=1 ' "$log" || fail "$name: rank 0 did not finish alone"
echo "$name: the stopped rank left out was ended; rank 0 finished alone"
# A rank stuck in user code (rank 2 sleeps after step 30): ddprun waits 2 x DDP_TIMEOUT + 10 s.
trigger='^PAUSED rank=2 step=30' sig=-0 patience=300
start=$(date +%s)
export ELASTIC_PAUSE=2:30:600000
kill_one stuck 2
unset ELASTIC_PAUSE
[ $rc -ne 0 ] || fail "stuck: the job whose rank 2 was stuck exited 0"
grep -q 'none formed within 14 s' "$dir/stuck.log" || fail "stuck: ddprun did not stop the ranks at its bound"
echo "stuck: ddprun ended $(( $(date +%s) - start )) s after the start, with $rc"
trigger='^STEP 30 world=3' sig=-9 patience=600 ddprun_flags=
export DDP_TIMEOUT=60s

"$ddprun" --in-process-recovery --nnodes 1:2 --node-rank 0 --nproc-per-node 1 true >"$dir/refused2.log" 2>&1
[ $? -eq 2 ] && grep -q 'it does not go with --nnodes MIN:MAX' "$dir/refused2.log" ||
  fail "--in-process-recovery with --nnodes MIN:MAX was not refused"

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
