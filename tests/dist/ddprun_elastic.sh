#!/bin/sh
# ddprun --nnodes MIN:MAX on one host (127.0.0.1; the multi-node cases: tests/netns/elastic.sh):
# ranges and node ranks refused with their reason; a round that never reaches MIN ends every agent
# after --rdzv-join-timeout, naming how many came; nodes with another --nproc-per-node are refused;
# SIGTERM to one agent ends every agent's ranks and the job, without a restart.
# usage: ddprun_elastic.sh DDPRUN
set -u
ddprun=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/ddprun-elastic.XXXXXX")
pids=""
trap 'for p in $pids; do kill "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
fail() { for f in "$work"/*.out; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done; echo "FAIL: $*"; exit 1; }
now_ms() { date +%s%3N; }
export DDP_TOKEN=elastic-test-token
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# agent NAME ARGS...: a ddprun in the background, output in $work/NAME.out, exit code in $work/NAME.rc,
# the pid of the `timeout` that runs it in $work/NAME.timeout.
agent() {
  name=$1; shift
  ( timeout -k 5 60 "$ddprun" --master-addr 127.0.0.1 --master-port "$port" --grace-period 1 "$@" > "$work/$name.out" 2>&1 &
    echo $! > "$work/$name.timeout"
    wait $!
    echo $? > "$work/$name.rc" ) &
  pids="$pids $!"
}
wait_all() { for p in $pids; do wait "$p"; done; pids=""; }
rc() { cat "$work/$1.rc"; }

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
  [ "$(rc $a)" -ne 0 ] || fail "$a: exit 0 with another --nproc-per-node"
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
wpid=$(cat /proc/"$(cat "$work/w.timeout")"/task/*/children 2>/dev/null | cut -d' ' -f1) # timeout's child: ddprun
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
grep -q "round $r ends: node [12] (agent [23]) was lost: no heartbeat for 1500 ms" "$work/s0.out" ||
  fail "node 0 did not name the silent agent"
# 1.5 s heartbeat + a look (0.1 s) + 2 grace periods (the sleeps ignore nothing: 1 s) + 0.5 s last call
[ $took -le 8000 ] || fail "round 1 started $took ms after an agent stopped"
kill -KILL "$spid"
kill -TERM "$(cat /proc/"$(cat "$work/s0.timeout")"/task/*/children | cut -d' ' -f1)"
wait_all
echo "ok: a stopped agent is lost by its heartbeat; round $((r + 1)) started with 2 nodes $took ms after SIGSTOP"
