#!/bin/sh
# dist.node_rejoin.three: a lost node's agent started again, on a job of three nodes x 1 rank on
# loopback (ddprun --in-process-recovery --max-restarts 1 --heartbeat-timeout 2; node 0 serves the
# store), where a rejoin meets node 0's verdict, a lost agent's record, or an agent not lost at all.
#   stale_record: node 2's rank is killed, then its joiner (the node's budget is spent: its agent
#                records its ranks' ends, "2 137 ...", and waits for the verdict); that agent is
#                killed and started again: it rejoins, its joiner rank2.2 joins and finishes, held
#                after its loop until node 0's ranks have ended. Node 0 must wait for the new
#                incarnation's record, not take the lost one's: every agent exits 0.
#   lost_first:  node 2's agent and rank are killed, then node 0's rank and its joiner: node 0's
#                agent, waiting for the job's end, counts node 2 lost. An agent started again
#                for node 2 after that is refused (exit 2, naming node 0's count), starting no
#                rank; nodes 0 and 1 exit 0 on rank 1's result. Before, an agent started again
#                that the user stops (SIGTERM) during its heartbeat watch ends at once, 143.
#   stalled_agent: node 2's agent is stopped (SIGSTOP) while its rank trains on; an agent started
#                again for node 2 sees the heartbeat stand still but rank 2 a member, waits, and is
#                refused (exit 2) once the stopped agent goes on (SIGCONT): never a world of 4.
# A job rank held at a step (ELASTIC_PAUSE) until the test's event keeps the job running however
# loaded the machine (~35 s in all).
#   node_rejoin_three.sh DDPRUN ELASTIC_RECOVERY_WORKER [CASE...]
set -u
ddprun=$1; worker=$2; shift 2
cases=${*:-stale_record lost_first stalled_agent}
dir=$(mktemp -d "${TMPDIR:-/tmp}/ddp-node-rejoin-three.XXXXXX")
p0= p1= p2= p3=
trap 'for p in $p0 $p1 $p2 $p3; do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done; rm -rf "$dir"' EXIT
export DDP_TOKEN=node-rejoin-three DDP_TIMEOUT=20s
total=400 every=10 step_ms=20
fail() {
  echo "FAILED: $*"
  for f in "$dir"/*.log; do echo "== $f"; cat "$f"; done
  exit 1
}
free_port() { python3 "$(dirname "$0")/../support/free_port.py"; }

# agent NAME NODE LOG: one agent, in the background, leading a process group of its own (a
# stopped process in an orphaned group is hung up by the kernel); its pid in $agent.
agent() {
  python3 -c 'import os, sys; os.setpgid(0, 0); os.execvp(sys.argv[1], sys.argv[1:])' \
    "$ddprun" --in-process-recovery --max-restarts 1 --heartbeat-timeout 2 --grace-period 1 --nnodes 3 \
    --node-rank "$2" --nproc-per-node 1 --master-addr 127.0.0.1 --master-port "$port" --no-prefix \
    "$worker" recover "$dir/$1" $total $every $step_ms >"$dir/$3" 2>&1 &
  agent=$!
}
# start NAME: the job's three agents (p0 p1 p2).
start() {
  port=$(free_port)
  mkdir -p "$dir/$1"
  agent "$1" 0 "$1.node0.log"; p0=$agent
  agent "$1" 1 "$1.node1.log"; p1=$agent
  agent "$1" 2 "$1.node2.log"; p2=$agent
}
# await WHAT SECONDS PATTERN FILE: waits for PATTERN in FILE.
await() {
  i=0
  until grep -q "$3" "$dir/$4" 2>/dev/null; do
    i=$((i + 1)); [ $i -le $(($2 * 10)) ] || fail "$1 within $2 s"
    sleep 0.1
  done
}
pid_in() { sed -n "s/^$1 rank=$2 pid=\([0-9]*\).*/\1/p" "$dir/$3" | head -1; }
# ended PID SECONDS WHAT: waits for the agent PID to exit; its code in $rc.
ended() {
  i=0
  while kill -0 "$1" 2>/dev/null; do
    i=$((i + 1)); [ $i -le $(($2 * 10)) ] || fail "$3 did not end within $2 s"
    sleep 0.1
  done
  wait "$1"; rc=$?
}

case_stale_record() {
  n=stale_record
  ELASTIC_PAUSE=0:300:20000 start $n
  await "$n: rank 0 did not reach step 30" 30 '^STEP 30 ' $n.node0.log
  kill -9 "$(pid_in PID 2 $n.node2.log)"
  await "$n: node 2 started no joiner" 20 '^JOINER-PID rank=2 ' $n.node2.log
  kill -9 "$(pid_in JOINER-PID 2 $n.node2.log)"
  await "$n: node 2's agent did not spend its budget" 20 'no joiner for rank 2' $n.node2.log
  sleep 1 # its round over, the agent records its ranks' ends and waits for the verdict
  kill -9 "$p2"; wait "$p2" 2>/dev/null; p2=
  ELASTIC_HOLD_END=2 agent $n 2 $n.node2b.log; p3=$agent
  await "$n: the agent started again registered no joiner" 20 'registered (job rank 2)' $n.node2b.log
  touch "$dir/$n/resume.0.300"
  await "$n: joiner rank2.2 did not finish its loop" 40 '^HELD-END rank=2' $n.node2b.log
  # Node 0's ranks end; before the fix it took the lost agent's record here and ended at once.
  await "$n: node 0's ranks did not end" 20 '^RESULT ok job_rank=0 ' $n.node0.log
  sleep 1.5
  touch "$dir/$n/resume.end.2"
  ended "$p0" 30 "$n: node 0's agent"; rc0=$rc; p0=
  ended "$p1" 30 "$n: node 1's agent"; rc1=$rc; p1=
  ended "$p3" 30 "$n: node 2's agent started again"; rc2=$rc; p3=
  [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] ||
    fail "$n: the agents exited $rc0 $rc1 $rc2 (node 2's started again), not 0 0 0"
  grep -q '^RESULT ok job_rank=2 .* world=3 ' "$dir/$n.node2b.log" || fail "$n: joiner rank2.2 did not finish ok at world 3"
  echo "$n: ok (node 0 waited for the rejoined incarnation's record)"
}

case_lost_first() {
  n=lost_first
  ELASTIC_PAUSE=1:300:20000 start $n
  await "$n: rank 0 did not reach step 30" 30 '^STEP 30 ' $n.node0.log
  kill -9 "$p2" "$(pid_in PID 2 $n.node2.log)"; wait "$p2" 2>/dev/null; p2=
  # First an agent started again that the user stops during its heartbeat watch: it ends at once.
  agent $n 2 $n.node2s.log; p3=$agent
  await "$n: the agent started again did not watch the heartbeat" 20 'watching its heartbeat' $n.node2s.log
  kill -TERM "$p3"
  ended "$p3" 5 "$n: the agent started again, stopped by the user during its watch"; p3=
  [ $rc -eq 143 ] && grep -q 'got signal 15 while watching' "$dir/$n.node2s.log" ||
    fail "$n: the agent stopped during its watch exited $rc, not 143 with its line"
  grep -q 'JOINER-PID' "$dir/$n.node2s.log" && fail "$n: the agent stopped during its watch started a joiner"
  kill -9 "$(pid_in PID 0 $n.node0.log)"
  await "$n: node 0 started no joiner" 20 '^JOINER-PID rank=0 ' $n.node0.log
  kill -9 "$(pid_in JOINER-PID 0 $n.node0.log)"
  await "$n: node 0 did not count node 2 lost" 30 "node 2's agent is lost" $n.node0.log
  agent $n 2 $n.node2b.log; p3=$agent
  ended "$p3" 20 "$n: node 2's agent started again"; p3=
  [ $rc -eq 2 ] || fail "$n: node 2's agent started again exited $rc, not 2 (refused)"
  grep -q "node 0 counted node 2's agent lost for good" "$dir/$n.node2b.log" ||
    fail "$n: the refusal does not name node 0's count"
  grep -q 'JOINER-PID' "$dir/$n.node2b.log" && fail "$n: the refused agent started a joiner"
  touch "$dir/$n/resume.1.300"
  ended "$p0" 40 "$n: node 0's agent"; rc0=$rc; p0=
  ended "$p1" 40 "$n: node 1's agent"; rc1=$rc; p1=
  [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] || fail "$n: nodes 0 and 1 exited $rc0 and $rc1, not 0 (rank 1 finished)"
  echo "$n: ok (refused once node 0 counted the node lost)"
}

case_stalled_agent() {
  n=stalled_agent
  ELASTIC_PAUSE=0:300:20000 start $n
  await "$n: rank 0 did not reach step 30" 30 '^STEP 30 ' $n.node0.log
  kill -STOP "$p2"
  agent $n 2 $n.node2b.log; p3=$agent
  await "$n: the agent started again did not wait for rank 2 to leave" 20 'still a member of generation' $n.node2b.log
  kill -CONT "$p2"
  ended "$p3" 20 "$n: node 2's agent started again"; p3=
  [ $rc -eq 2 ] || fail "$n: node 2's agent started again exited $rc, not 2 (refused)"
  grep -q "node 2's agent is alive" "$dir/$n.node2b.log" || fail "$n: the refusal does not say the agent is alive"
  touch "$dir/$n/resume.0.300"
  ended "$p0" 40 "$n: node 0's agent"; rc0=$rc; p0=
  ended "$p1" 40 "$n: node 1's agent"; rc1=$rc; p1=
  ended "$p2" 40 "$n: node 2's agent"; rc2=$rc; p2=
  [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] || fail "$n: the agents exited $rc0 $rc1 $rc2, not 0 0 0"
  cat "$dir"/$n.*.log | grep -q 'world=4' && fail "$n: a world of 4 in a job of 3 slots"
  echo "$n: ok (a stalled agent's ranks train on: no rejoin in its place)"
}

for c in $cases; do "case_$c"; done
echo "PASSED: $cases"
