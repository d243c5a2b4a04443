#!/bin/sh
# dist.elastic.join: joiners under ddprun --in-process-recovery --max-restarts 1. A job of 3 ranks
# (ddp::elastic::run, DDP + SGD on a global batch of 6, a commit every 10 steps) loses a rank to
# kill -9; ddprun starts a joiner in its slot (other initial values than the job's), which the
# running ranks admit at a commit and send their state.
#   joined:       rank 2 killed after step 30 (paused after its commit there, as in every case): the survivors go on at world 2 in their own
#                 processes, the joiner joins at a later commit (world 3 again) and every rank
#                 ends on single-process training (the worker's oracle, 1e-5) and on an
#                 uninterrupted run at world 3 (TOL); the joiner reports the step it received.
#   late:         rank 2 killed after the last commit (step 120 of 125): the job ends at once
#                 with 0, the joiner exits 0 saying the job ended without it.
#   last_commit:  rank 2 killed after step 110, the joiner registered before the last commit
#                 (step 120 of 120) with options::last_step = 120: nobody is admitted there (a
#                 generation formed for a loop with no step left), the survivors end in
#                 generation 1 and the joiner's run() returns false.
#   killed_waiting: the joiner killed before any commit could admit it (rank 0 held outside
#                 collectives in generation 1 until its agent withdrew it): not admitted, no
#                 generation after 1.
#   admitted_stopped: the joiner stopped (SIGSTOP) while waiting, then admitted at the commit
#                 of generation 1: the meeting of generation 2 forms without it within the last
#                 call (1 s), and ddprun ends it once the job has ended; the job succeeds.
# No case waits on a time: rank 0 is held after step 31 of generation 1 until the event the case
# needs (the joiner registered, withdrawn, stopped) is seen in the log, then a resume file frees it.
#   exit0_unjoined: the joiner exits 0 at once without joining while the job runs; rank 1 is
#                 then killed after step 60 and rank 0 finishes alone: the job succeeds (the
#                 joiner's exit 0 is no rank that finished, so the later loss is no failure after it).
#   joined_adam:  joined with sharded_data_parallel and Adam held by the state: the joiner's Adam
#                 goes on from the survivors' step count and moments (single-process Adam, 1e-5).
# Each case prints RECOVERY_MS lines: kill -9 to the survivors' first step at world 2, and to the
# first step of world 3 with the joiner.
#   elastic_join.sh DDPRUN ELASTIC_RECOVERY_WORKER
set -u
ddprun=$1; worker=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/ddp-elastic-join.XXXXXX")
launcher=
trap '[ -n "$launcher" ] && kill -9 "$launcher" 2>/dev/null; rm -rf "$dir"' EXIT
export DDP_TIMEOUT=60s
tol=1e-5 # as elastic_recovery.sh: only float summation order differs (ring of 2 or 3)
total=120 every=10 step_ms=10
fail() { echo "FAILED: $*"; for f in "$dir"/*.log; do echo "== $f"; cat "$f"; done; exit 1; }

# wait_for NAME PATTERN SECONDS: until the job's log matches.
wait_for() {
  i=0
  until grep -q "$2" "$dir/$1.log" 2>/dev/null; do
    i=$((i + 1)); [ $i -le $(($3 * 20)) ] || fail "$1: '$2' not seen within $3 s"
    sleep 0.05
  done
}
# start NAME TOTAL [VARIANT]: the job of 3 with joiners, in the background.
start() {
  mkdir -p "$dir/$1"
  "$ddprun" --in-process-recovery --max-restarts 1 --grace-period 2 --no-prefix --nproc-per-node 3 \
    "$worker" recover "$dir/$1" "$2" $every $step_ms ${3:-} >"$dir/$1.log" 2>&1 &
  launcher=$!
}
pid_of() { sed -n "s/^PID rank=$2 pid=\([0-9]*\)\$/\1/p" "$dir/$1.log"; }
joiner_pid() { sed -n 's/^JOINER-PID rank=2 pid=\([0-9]*\) .*/\1/p' "$dir/$1.log"; }
# world3_matches CASE REFERENCE_DIR: every rank of CASE finished ok at generation 2 of world 3,
# rank 2 in the joiner's process and the others in their first ones, within $tol of REFERENCE_DIR.
world3_matches() {
  jpid=$(joiner_pid "$1")
  for r in 0 1 2; do
    pid=$(pid_of "$1" $r)
    [ $r -eq 2 ] && pid=$jpid
    grep -q "^RESULT ok job_rank=$r pid=$pid generation=2 world=3 " "$dir/$1.log" ||
      fail "$1: rank $r did not finish ok in process $pid at generation 2 of world 3"
    d=$("$worker" compare "$dir/$1/params.$r" "$2/params.$r" | sed -n 's/^DIFF //p')
    echo "$1: rank $r against the uninterrupted run: $d (tolerance $tol)"
    awk -v d="$d" -v t="$tol" 'BEGIN { exit !(d <= t) }' || fail "$1: rank $r differs from the uninterrupted run by $d"
  done
}
# finish NAME SECONDS: waits for ddprun (at most SECONDS) and sets rc and secs (from the kill).
finish() {
  i=0
  while kill -0 "$launcher" 2>/dev/null; do
    i=$((i + 1)); [ $i -le $(($2 * 10)) ] || fail "$1: the job did not end within $2 s of the kill"
    sleep 0.1
  done
  wait "$launcher"; rc=$?
  launcher=
  end_ns=$(date +%s%N)
}
kill_rank() { # NAME RANK
  victim=$(pid_of "$1" "$2")
  [ -n "$victim" ] || fail "$1: rank $2 printed no PID"
  kill_ns=$(date +%s%N)
  kill -9 "$victim" || fail "$1: rank $2 had ended before the kill (a loaded machine: rerun)"
}
first_ns() { sed -n "s/^RECOVERED generation=$2 world=$3 .*first_step_ns=\([0-9]*\)\$/\1/p" "$dir/$1.log" | sort -n | head -1; }

out=$("$ddprun" --no-prefix --nproc-per-node 3 "$worker" recover "$dir" $total $every $step_ms 2>&1) ||
  { echo "$out"; fail "the uninterrupted run failed"; }

# Every case but late pauses rank 2 after its commit of step 30 (in generation 0) and kills it
# there: no rank can pass step 30 before the kill, however loaded the machine.
hold_30=2:30:600000

# hold_31 holds rank 0 after step 31 of generation 1 until resume NAME (at most 60 s).
hold_31=0:31:60000:1
resume() { touch "$dir/$1/resume.0.31"; }

# joined: rank 0 held until the joiner has registered, so a commit after it admits it.
export ELASTIC_PAUSE=$hold_30,$hold_31
start joined $total
unset ELASTIC_PAUSE
wait_for joined '^PAUSED rank=2 step=30$' 30
kill_rank joined 2
wait_for joined 'joiner rank2.1.*registered (job rank 2)' 20
wait_for joined '^PAUSED rank=0 step=31$' 30
resume joined
finish joined 60
[ $rc -eq 0 ] || fail "joined: the job exited with $rc"
grep -q '^ddprun: started joiner rank2.1 (pid [0-9]*) in the slot of rank 2' "$dir/joined.log" ||
  fail "joined: ddprun started no joiner in rank 2's slot"
[ "$(grep -c '^RECOVERED generation=1 world=2 ' "$dir/joined.log")" -eq 2 ] ||
  fail "joined: the survivors did not go on at world 2 (generation 1)"
[ "$(grep -c '^RECOVERED generation=2 world=3 ' "$dir/joined.log")" -eq 3 ] ||
  fail "joined: generation 2 is not the world of 3 with the joiner"
world3_matches joined "$dir"
got=$(sed -n 's/^JOINED id=rank2.1 generation=2 world=3 rank=2 received_step=\([0-9]*\)$/\1/p' "$dir/joined.log")
[ -n "$got" ] && [ "$got" -gt 30 ] && [ $((got % every)) -eq 0 ] ||
  fail "joined: the joiner received step '$got', not a commit after the kill"
echo "joined: the joiner received the commit of step $got"
echo "RECOVERY_MS $(( ($(first_ns joined 1 2) - kill_ns) / 1000000 )) (joined: kill -9 of rank 2 to the survivors' first step at world 2)"
echo "RECOVERY_MS $(( ($(first_ns joined 2 3) - kill_ns) / 1000000 )) (joined: kill -9 of rank 2 to the first step of world 3 with the joiner)"

# late: rank 2 paused after the last commit (step 120 of 125), then killed.
export ELASTIC_PAUSE=2:120:600000
start late 125
wait_for late '^PAUSED rank=2 step=120$' 30
unset ELASTIC_PAUSE
kill_rank late 2
finish late 30
secs_ms=$(( (end_ns - kill_ns) / 1000000 ))
[ $rc -eq 0 ] || fail "late: the job whose joiner came after the last commit exited with $rc"
grep -q '^JOINER ended-without id=rank2.1 rank=2 ' "$dir/late.log" || fail "late: the joiner did not say the job ended without it"
grep -q 'the job ended before admitting this joiner' "$dir/late.log" || fail "late: no message from the joiner's run()"
[ "$(grep -c '^RESULT ok job_rank=[01] .*generation=1 world=2 ' "$dir/late.log")" -eq 2 ] ||
  fail "late: the survivors did not finish at world 2"
[ $secs_ms -lt 10000 ] || fail "late: the job took $secs_ms ms after the kill to end (a joiner waited)"
grep -q 'killing it' "$dir/late.log" && fail "late: ddprun had to kill the joiner (it did not learn of the job's end)"
echo "late: the job ended $secs_ms ms after the kill, the joiner exited 0 on its own"

# last_commit: rank 0 held after step 111 of generation 1 until the joiner has registered.
export ELASTIC_PAUSE=2:110:600000,0:111:60000:1 ELASTIC_LAST_STEP=$total
start last_commit $total
unset ELASTIC_PAUSE ELASTIC_LAST_STEP
wait_for last_commit '^PAUSED rank=2 step=110$' 30
kill_rank last_commit 2
wait_for last_commit 'joiner rank2.1.*registered (job rank 2)' 20
wait_for last_commit '^PAUSED rank=0 step=111$' 30
touch "$dir/last_commit/resume.0.111"
finish last_commit 60
[ $rc -eq 0 ] || fail "last_commit: the job exited with $rc"
grep -q 'admitted joiner' "$dir/last_commit.log" && fail "last_commit: a joiner was admitted at the last commit"
grep -q '^RECOVERED generation=2' "$dir/last_commit.log" && fail "last_commit: a generation was formed to run no step"
[ "$(grep -c '^RESULT ok job_rank=[01] .*generation=1 world=2 ' "$dir/last_commit.log")" -eq 2 ] ||
  fail "last_commit: the survivors did not finish in generation 1 at world 2"
grep -q '^JOINER ended-without id=rank2.1 rank=2 ' "$dir/last_commit.log" ||
  fail "last_commit: the joiner's run() did not return false"
echo "last_commit: nobody admitted at the last commit; the joiner ended with the job"

# killed_waiting: rank 0 held after step 31 of generation 1 (no commit meanwhile) until the
# joiner's agent has withdrawn it.
export ELASTIC_PAUSE=$hold_30,$hold_31
start killed_waiting $total
wait_for killed_waiting '^PAUSED rank=2 step=30$' 30
kill_rank killed_waiting 2
wait_for killed_waiting 'joiner rank2.1.*registered (job rank 2)' 20
wait_for killed_waiting '^PAUSED rank=0 step=31$' 30
unset ELASTIC_PAUSE
kill -9 "$(joiner_pid killed_waiting)" || fail "killed_waiting: the joiner had ended before the kill"
wait_for killed_waiting '^ddprun: joiner rank2.1 is withdrawn' 20
resume killed_waiting
finish killed_waiting 60
[ $rc -eq 0 ] || fail "killed_waiting: the job exited with $rc"
grep -q 'admitted joiner' "$dir/killed_waiting.log" && fail "killed_waiting: the dead joiner was admitted"
grep -q '^RECOVERED generation=2' "$dir/killed_waiting.log" && fail "killed_waiting: a generation was torn down for it"
[ "$(grep -c '^RESULT ok job_rank=[01] .*generation=1 world=2 ' "$dir/killed_waiting.log")" -eq 2 ] ||
  fail "killed_waiting: the survivors did not finish in generation 1 at world 2"
echo "killed_waiting: not admitted, generation 1 went on to the end"

# admitted_stopped: the joiner stopped while waiting; admitted at generation 1's next commit.
export ELASTIC_PAUSE=$hold_30,$hold_31 ELASTIC_LAST_CALL_MS=1000
start admitted_stopped $total
wait_for admitted_stopped '^PAUSED rank=2 step=30$' 30
kill_rank admitted_stopped 2
wait_for admitted_stopped 'joiner rank2.1.*registered (job rank 2)' 20
wait_for admitted_stopped '^PAUSED rank=0 step=31$' 30
kill -STOP "$(joiner_pid admitted_stopped)" || fail "admitted_stopped: the joiner had ended before SIGSTOP"
resume admitted_stopped
unset ELASTIC_PAUSE ELASTIC_LAST_CALL_MS
finish admitted_stopped 60
[ $rc -eq 0 ] || fail "admitted_stopped: the job exited with $rc"
grep -q 'admitted joiner(s) rank2.1' "$dir/admitted_stopped.log" || fail "admitted_stopped: the joiner was not admitted"
[ "$(grep -c '^RESULT ok job_rank=[01] .*generation=2 world=2 ' "$dir/admitted_stopped.log")" -eq 2 ] ||
  fail "admitted_stopped: generation 2 did not form without the joiner"
grep -q 'joiner rank2.1 (pid [0-9]*) is still waiting' "$dir/admitted_stopped.log" ||
  fail "admitted_stopped: ddprun did not end the stopped joiner"
echo "admitted_stopped: generation 2 formed without the admitted joiner; ddprun ended it"
# exit0_unjoined: rank 1 is killed only once ddprun has reaped the joiner.
export ELASTIC_PAUSE=$hold_30,1:60:600000:1 ELASTIC_JOINER_EXIT0=1
start exit0_unjoined $total
unset ELASTIC_PAUSE ELASTIC_JOINER_EXIT0
wait_for exit0_unjoined '^PAUSED rank=2 step=30$' 30
kill_rank exit0_unjoined 2
wait_for exit0_unjoined '^JOINER exit0 id=rank2.1$' 20
jpid=$(joiner_pid exit0_unjoined)
i=0
while kill -0 "$jpid" 2>/dev/null; do
  i=$((i + 1)); [ $i -le 400 ] || fail "exit0_unjoined: ddprun did not reap the joiner within 20 s"
  sleep 0.05
done
wait_for exit0_unjoined '^PAUSED rank=1 step=60$' 30
kill_rank exit0_unjoined 1
finish exit0_unjoined 60
[ $rc -eq 0 ] || fail "exit0_unjoined: the job exited with $rc (the joiner's exit 0 counted as a rank that finished)"
grep -q '^RESULT ok job_rank=0 .*generation=2 world=1 ' "$dir/exit0_unjoined.log" ||
  fail "exit0_unjoined: rank 0 did not finish alone at generation 2"
grep -q 'joiner rank2.1 (pid [0-9]*) exited 0 without joining while the job runs' "$dir/exit0_unjoined.log" ||
  fail "exit0_unjoined: ddprun did not say the joiner's exit 0 was no success"
echo "exit0_unjoined: the job succeeded after the joiner's exit 0 and rank 1's loss"

# joined_adam: the same with sharded_data_parallel and Adam held by the state (state.hold): the
# joiner receives Adam's moments and step count with the model, cut into world 3's shards, and
# every rank ends on single-process Adam (the worker's oracle) and the uninterrupted Adam run.
mkdir -p "$dir/adam_ref"
out=$("$ddprun" --no-prefix --nproc-per-node 3 "$worker" recover "$dir/adam_ref" $total $every $step_ms adam 2>&1) ||
  { echo "$out"; fail "the uninterrupted Adam run failed"; }
export ELASTIC_PAUSE=$hold_30
start joined_adam $total adam
unset ELASTIC_PAUSE
wait_for joined_adam '^PAUSED rank=2 step=30$' 30
kill_rank joined_adam 2
finish joined_adam 60
[ $rc -eq 0 ] || fail "joined_adam: the job exited with $rc"
[ "$(grep -c '^RECOVERED generation=2 world=3 ' "$dir/joined_adam.log")" -eq 3 ] ||
  fail "joined_adam: generation 2 is not the world of 3 with the joiner"
set -- $(sed -n 's/^RECOVERED generation=2 world=3 rank=2 from_step=\([0-9]*\) adam_steps=\([0-9]*\) .*/\1 \2/p' \
  "$dir/joined_adam.log")
[ $# -eq 2 ] && [ "$1" -gt 30 ] && [ "$2" -eq $(($1 + 1)) ] ||
  fail "joined_adam: the joiner's Adam is at step '${2:-}' after its first step from '${1:-}'"
world3_matches joined_adam "$dir/adam_ref"
echo "joined_adam: the joiner's Adam went on from step $1 (its step count $2 after one step)"
echo "PASSED"
