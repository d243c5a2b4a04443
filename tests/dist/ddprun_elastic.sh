#!/bin/sh
# ddprun --nnodes MIN:MAX on one host (127.0.0.1; the multi-node cases: tests/netns/elastic.sh):
# ranges and node ranks refused with their reason; a round that never reaches MIN ends every agent
# after --rdzv-join-timeout, naming how many came; nodes with another --nproc-per-node are refused;
# SIGTERM to one agent ends every agent's ranks and the job, without a restart; a member whose ranks
# end long before the host's waits for it (and the host for it); a join restarts no round that is
# finishing or whose ranks failed on its stop, and cannot restart rounds for ever; the first
# failure reported gives the job's code; a silent store's host is found within the heartbeat timeout.
# usage: ddprun_elastic.sh DDPRUN
set -u
ddprun=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/ddprun-elastic.XXXXXX")
pids=""
long_pids=""
# On failure: end every agent still running (its `timeout` passes SIGTERM on, then SIGKILL after 5 s).
cleanup() {
  for f in "$work"/*.timeout; do
    [ -f "$f" ] && [ ! -f "${f%.timeout}.rc" ] && kill -TERM "$(cat "$f")" 2>/dev/null
  done
  for p in $pids $long_pids; do wait "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
# A signal (ctest's timeout, ^C, scripts/test stopping its waiting tests) runs the EXIT trap too.
trap 'exit 143' TERM HUP
trap 'exit 130' INT
fail() { for f in "$work"/*.out; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done; echo "FAIL: $*"; exit 1; }
now_ms() { date +%s%3N; }
export DDP_TOKEN=elastic-test-token
# A free port below the ephemeral range (tests/support/free_port.py says why).
free_port() { python3 "$(dirname "$0")/../support/free_port.py"; }
# agent NAME ARGS...: a ddprun in the background, output in $work/NAME.out, exit code in $work/NAME.rc,
# the pid of the `timeout` that runs it in $work/NAME.timeout.
agent() {
  name=$1; shift
  ( timeout -k 5 60 "$ddprun" --master-addr 127.0.0.1 --master-port "$port" --grace-period "$grace" "$@" > "$work/$name.out" 2>&1 &
    echo $! > "$work/$name.timeout"
    wait $!
    echo $? > "$work/$name.rc" ) &
  pids="$pids $!"
}
wait_all() { for p in $pids; do wait "$p"; done; pids=""; }
rc() { cat "$work/$1.rc"; }
# ddprun_of NAME: the agent's ddprun (the child of its `timeout`).
ddprun_of() { cat /proc/"$(cat "$work/$1.timeout")"/task/*/children 2>/dev/null | cut -d' ' -f1; }
# until_seen N PATTERN FILES...: waits up to 30 s for N lines matching PATTERN in FILES.
until_seen() {
  n=$1 pattern=$2; shift 2; i=0
  until [ "$(cat "$@" 2>/dev/null | grep -c -- "$pattern")" -ge "$n" ]; do
    i=$((i + 1)); [ $i -lt 300 ] || fail "no $n lines '$pattern' within 30 s"; sleep 0.1
  done
}
grace=1

# In the background for the whole script: the member's rank runs 33 s, the host's ends at once.
# The host waits as long as the member beats (it used to count it lost after hb + 4 x grace + 30 s).
long_port=$(free_port)
port=$long_port grace=0
long_job='[ "$RANK" = 0 ] || exec sleep 33'
agent long0 --nnodes 2:2 --node-rank 0 --max-restarts 0 --heartbeat-timeout 1 sh -c "$long_job"
agent long1 --nnodes 2:2 --max-restarts 0 --heartbeat-timeout 1 sh -c "$long_job"
long_pids=$pids pids="" grace=1

# Refused before anything starts.
"$ddprun" --nnodes 3:2 true > "$work/range.out" 2>&1; r=$?
[ $r -eq 2 ] && grep -q -- "--nnodes 3:2 must be a number of nodes N (1..65536) or an elastic range MIN:MAX with 1 <= MIN <= MAX" "$work/range.out" ||
  fail "--nnodes 3:2: exit $r"
"$ddprun" --nnodes 2:3 --node-rank 1 true > "$work/rank.out" 2>&1; r=$?
[ $r -eq 2 ] && grep -q -- "--node-rank 1 with --nnodes MIN:MAX: node ranks are handed out per round" "$work/rank.out" ||
  fail "--node-rank 1 under --nnodes 2:3: exit $r"
echo "ok: a bad range and a node rank other than 0 are refused"

# The store's host alone, MIN 2: the round never closes; every wait ends at the join timeout.
port=$(free_port)
t0=$(now_ms)
agent alone --nnodes 2:3 --node-rank 0 --rdzv-join-timeout 2 true
wait_all
took=$(( $(now_ms) - t0 ))
[ "$(rc alone)" -eq 1 ] || fail "a round short of MIN: exit $(rc alone), not 1"
grep -q "round 0 of the elastic rendezvous did not reach its 2 nodes (--nnodes 2:3): 1 joined within 2 s (--rdzv-join-timeout)" "$work/alone.out" ||
  fail "no message naming how many nodes joined"
[ $took -le 8000 ] || fail "the join timeout of 2 s ended the job after $took ms"
echo "ok: a round short of MIN ends after $took ms (--rdzv-join-timeout 2)"

# Another --nproc-per-node on one node: both agents end, saying so.
port=$(free_port)
agent host --nnodes 2:2 --node-rank 0 --nproc-per-node 1 true
agent other --nnodes 2:2 --nproc-per-node 2 true
wait_all
for a in host other; do
  [ "$(rc $a)" -eq 2 ] || fail "$a: exit $(rc $a) with another --nproc-per-node, not 2 (every agent says the same)"
  grep -q "give every node the same --nproc-per-node" "$work/$a.out" || fail "$a did not name the mismatch"
done
echo "ok: another --nproc-per-node is refused on both nodes"

# SIGTERM to the non-host agent mid-round: every rank stops, every agent exits 143, no restart.
port=$(free_port)
job='echo "round=$DDP_RESTART_ROUND world=$WORLD_SIZE rank=$RANK"; exec sleep 30'
agent h --nnodes 2:3 --node-rank 0 --max-restarts 3 --rdzv-last-call 0.5 sh -c "$job"
agent w --nnodes 2:3 --max-restarts 3 --rdzv-last-call 0.5 sh -c "$job"
i=0
until [ "$(cat "$work/h.out" "$work/w.out" 2>/dev/null | grep -c 'round=0 world=2 ')" -eq 2 ]; do
  i=$((i + 1)); [ $i -lt 300 ] || fail "the 2 ranks of round 0 did not start within 30 s"; sleep 0.1
done
wpid=$(ddprun_of w)
t0=$(now_ms)
[ -n "$wpid" ] && kill -TERM "$wpid" || fail "no ddprun to signal"
wait_all
took=$(( $(now_ms) - t0 ))
for a in h w; do [ "$(rc $a)" -eq 143 ] || fail "$a exited with $(rc $a) after SIGTERM, not 143"; done
! grep -q "round=1" "$work/h.out" "$work/w.out" || fail "a round 1 was started after SIGTERM"
[ $took -le 10000 ] || fail "the job ended $took ms after SIGTERM"
echo "ok: SIGTERM to an agent ends the job on both nodes in $took ms, no restart"

# SIGSTOP to one of 3 agents whose ranks never fail on their own: only the heartbeat can tell.
port=$(free_port)
for a in s0 s1 s2; do
  [ $a = s0 ] && host="--node-rank 0" || host=""
  agent $a --nnodes 2:3 $host --max-restarts 1 --rdzv-last-call 0.5 --heartbeat-timeout 1.5 sh -c "$job"
  [ $a = s0 ] && sleep 0.2
done
# A loaded machine may start an agent after round 0's last call: then a later round has all 3.
i=0
until [ "$(cat "$work"/s?.out 2>/dev/null | grep -c 'round=[0-9]* world=3 ')" -eq 3 ]; do
  i=$((i + 1)); [ $i -lt 300 ] || fail "no round of 3 ranks within 30 s"; sleep 0.1
done
r=$(sed -n 's/^\[0\] round=\([0-9]*\) world=3 .*/\1/p' "$work/s0.out")
spid=$(cat /proc/"$(cat "$work/s2.timeout")"/task/*/children 2>/dev/null | cut -d' ' -f1)
[ -n "$spid" ] && kill -STOP "$spid" || fail "no ddprun to stop"
t0=$(now_ms)
i=0
until [ "$(cat "$work/s0.out" "$work/s1.out" | grep -c "round=$((r + 1)) world=2 ")" -eq 2 ]; do
  i=$((i + 1)); [ $i -lt 200 ] || fail "no round $((r + 1)) of 2 ranks within 20 s of stopping an agent"; sleep 0.05
done
took=$(( $(now_ms) - t0 ))
grep -q "round $r ends: node [12] (agent [0-9]*) was lost: no heartbeat for 1500 ms" "$work/s0.out" ||
  fail "node 0 did not name the silent agent"
# 1.5 s heartbeat + a look (0.1 s) + 2 grace periods (the sleeps ignore nothing: 1 s) + 0.5 s last call
[ $took -le 8000 ] || fail "round 1 started $took ms after an agent stopped"
kill -KILL "$spid"
kill -TERM "$(cat /proc/"$(cat "$work/s0.timeout")"/task/*/children | cut -d' ' -f1)"
wait_all
echo "ok: a stopped agent is lost by its heartbeat; round $((r + 1)) started with 2 nodes $took ms after SIGSTOP"

# --rdzv-join-timeout shorter than the last call: at the deadline the round closes with MIN or more.
port=$(free_port)
agent jt0 --nnodes 2:3 --node-rank 0 --rdzv-join-timeout 2 --rdzv-last-call 10 true
agent jt1 --nnodes 2:3 --rdzv-join-timeout 10 true
wait_all
for a in jt0 jt1; do [ "$(rc $a)" -eq 0 ] || fail "$a: exit $(rc $a) with 2 of MIN 2 at the join timeout"; done
echo "ok: a round with MIN nodes closes at --rdzv-join-timeout, whatever the last call"

# --rdzv-last-call 0, MIN 1: the agent left out of round 0 is waited for in round 1 (it used to be
# left out of every round, each restarting the job for its join, for ever).
port=$(free_port)
job='echo "round=$DDP_RESTART_ROUND world=$WORLD_SIZE rank=$RANK"; sleep 2'
agent l0 --nnodes 1:2 --node-rank 0 --rdzv-last-call 0 sh -c "$job"
sleep 0.3
agent l1 --nnodes 1:2 --rdzv-last-call 0 sh -c "$job"
i=0
until [ -f "$work/l0.rc" ] && [ -f "$work/l1.rc" ]; do
  i=$((i + 1)); [ $i -lt 150 ] || fail "no end within 15 s: rounds $(grep -c 'round=' "$work/l0.out") on node 0"; sleep 0.1
done
wait_all
for a in l0 l1; do [ "$(rc $a)" -eq 0 ] || fail "$a: exit $(rc $a)"; done
grep -q "world=2 rank=1" "$work/l1.out" || fail "the second agent never had a rank"
[ "$(grep -c 'round=' "$work/l0.out")" -le 2 ] || fail "$(grep -c 'round=' "$work/l0.out") rounds for one join"
echo "ok: --rdzv-last-call 0: the agent left out joins the next round"

# A join while the host's rank is stopped for it, --grace-period 0: the member's rank fails on that
# stop before its agent reads the report; the round still ended for the join, not counted.
port=$(free_port) grace=0
export RANK0_PID="$work/rank0.pid"
job='f=$RANK0_PID.$DDP_RESTART_ROUND; echo "round=$DDP_RESTART_ROUND world=$WORLD_SIZE rank=$RANK"
if [ "$RANK" = 0 ]; then echo $$ > "$f"; [ "$DDP_RESTART_ROUND" = 0 ] && exec sleep 30; exec sleep 1; fi
until [ -s "$f" ]; do sleep 0.02; done; while kill -0 "$(cat "$f")" 2>/dev/null; do sleep 0.02; done
[ "$DDP_RESTART_ROUND" = 0 ] && exit 1; exit 0'
agent g0 --nnodes 2:3 --node-rank 0 --max-restarts 0 --rdzv-last-call 0.5 sh -c "$job"
agent g1 --nnodes 2:3 --max-restarts 0 --rdzv-last-call 0.5 sh -c "$job"
until_seen 2 "round=0 world=2 " "$work/g0.out" "$work/g1.out"
agent g2 --nnodes 2:3 --max-restarts 0 --rdzv-last-call 0.5 sh -c "$job"
wait_all
grace=1
for a in g0 g1 g2; do [ "$(rc $a)" -eq 0 ] || fail "$a: exit $(rc $a): the join was counted as a failure"; done
grep -q "failures counted: 0 of --max-restarts 0" "$work/g0.out" || fail "no uncounted restart for the join"
echo "ok: a rank failing on a join's stop does not make the join a failure"

# A join after the member's ranks ended well: the job is finishing, no round restarts for it.
port=$(free_port)
job='echo "round=$DDP_RESTART_ROUND world=$WORLD_SIZE rank=$RANK"; [ "$RANK" = 0 ] && sleep 3; exit 0'
agent f0 --nnodes 2:3 --node-rank 0 --rdzv-last-call 0.5 sh -c "$job"
agent f1 --nnodes 2:3 --rdzv-last-call 0.5 sh -c "$job"
until_seen 2 "round=0 world=2 " "$work/f0.out" "$work/f1.out"
sleep 0.5
agent f2 --nnodes 2:3 --rdzv-last-call 0.5 sh -c "$job"
wait_all
for a in f0 f1 f2; do [ "$(rc $a)" -eq 0 ] || fail "$a: exit $(rc $a)"; done
! grep -q "round=1" "$work/f0.out" || fail "a join restarted a round that node 1 had finished"
grep -q "the job finished without this node" "$work/f2.out" || fail "the newcomer did not say the job finished"
echo "ok: a join does not restart a round that another node finished"

# Node 1's rank dies of SIGSEGV, node 0's then exits 70 on the loss: the first failure is the job's.
port=$(free_port)
export RANK1_PID="$work/rank1.pid"
job='if [ "$RANK" = 1 ]; then echo $$ > "$RANK1_PID"; sleep 0.5; kill -SEGV $$; fi
until [ -s "$RANK1_PID" ]; do sleep 0.02; done; while kill -0 "$(cat "$RANK1_PID")" 2>/dev/null; do sleep 0.02; done
exit 70'
agent c0 --nnodes 2:2 --node-rank 0 --max-restarts 0 sh -c "$job"
agent c1 --nnodes 2:2 --max-restarts 0 sh -c "$job"
wait_all
# Node 1 reports first unless a loaded machine delays its agent: either way one failure, quoted with its code.
[ "$(rc c0)" -eq "$(rc c1)" ] || fail "the agents exited with $(rc c0) and $(rc c1)"
for a in c0 c1; do
  case "$(grep "are spent:" "$work/$a.out")" in
  *"rank 1 was killed by signal 11"*"(ddprun exits with 139)") ;;
  *"rank 0 exited with code 70 "*"(ddprun exits with 70)") ;;
  *) fail "$a: the failure quoted and the exit code ($(rc $a)) do not match" ;;
  esac
done
echo "ok: the failure reported first gives every agent's code and message (exit $(rc c0))"

# SIGSTOP of the store's host: a member finds it silent within --heartbeat-timeout (1 s) and ends.
port=$(free_port)
agent z0 --nnodes 2:2 --node-rank 0 --heartbeat-timeout 1 sh -c 'echo "up rank=$RANK"; exec sleep 30'
agent z1 --nnodes 2:2 --heartbeat-timeout 1 sh -c 'echo "up rank=$RANK"; exec sleep 30'
until_seen 2 "up rank=" "$work/z0.out" "$work/z1.out"
zpid=$(ddprun_of z0)
[ -n "$zpid" ] && kill -STOP "$zpid" || fail "no ddprun to stop"
t0=$(now_ms)
until [ -f "$work/z1.rc" ]; do [ $(( $(now_ms) - t0 )) -lt 20000 ] || break; sleep 0.05; done
took=$(( $(now_ms) - t0 ))
kill -KILL "$zpid"
wait_all
[ "$(rc z1)" -eq 1 ] || fail "node 1 exited with $(rc z1) after the store's host stopped"
grep -q "the store's host (node 0, 127.0.0.1:$port) is gone or does not answer" "$work/z1.out" || fail "node 1 did not name the silent host"
# 1 s heartbeat timeout + the ranks' stop (2 grace periods of 1 s) + a margin for a loaded machine
[ $took -le 6000 ] || fail "node 1 ended $took ms after the store's host stopped"
echo "ok: a stopped store's host is found silent; node 1 ended $took ms later"

# No --node-rank anywhere: the agent on the machine that --master-addr names (here by its host
# name, which torchrun's rule takes without asking the resolver) serves; a second one there finds
# the port taken and joins the first. Skipped where the host name does not resolve.
hn=$(hostname)
if getent hosts "$hn" > /dev/null 2>&1; then
  port=$(free_port)
  for a in h0 h1; do
    ( timeout -k 5 60 "$ddprun" --nnodes 2:2 --master-addr "$hn" --master-port "$port" --grace-period 1 \
        --heartbeat-timeout 3 sh -c 'echo "up rank=$RANK world=$WORLD_SIZE"' > "$work/$a.out" 2>&1
      echo $? > "$work/$a.rc" ) &
    pids="$pids $!"
    [ $a = h0 ] && until_seen 1 "serving the store on $hn:$port" "$work/h0.out"
  done
  wait_all
  for a in h0 h1; do [ "$(rc $a)" -eq 0 ] || fail "$a: exit $(rc $a) with the host found by its name"; done
  grep -q "not serving the store (.*): joining the agent that does" "$work/h1.out" || fail "h1 did not join h0"
  [ "$(cat "$work/h0.out" "$work/h1.out" | grep -c 'up rank=[01] world=2')" -eq 2 ] || fail "no world of 2"
  echo "ok: the store's host found by its host name ($hn), a second agent there joined it"
else
  echo "skipped: the host name $hn does not resolve"
fi

for p in $long_pids; do wait "$p"; done
long_pids=""
for a in long0 long1; do [ "$(rc $a)" -eq 0 ] || fail "$a: exit $(rc $a) when node 1's rank ran 33 s after node 0's"; done
echo "ok: the host waits for a member that beats, 33 s after its own ranks ended"
