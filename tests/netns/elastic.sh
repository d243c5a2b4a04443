#!/bin/sh
# ddprun --nnodes 2:4 on netns nodes (docs/elastic.md): runs inside `tests/netns/netns.sh --nodes 4`,
# one ddprun per node, node 0's with --node-rank 0 (it serves the store), one rank per node, the job
# checkpoint_worker's `elastic` phase (300 steps of DDP + SGD, a checkpoint every 10, resumed by each
# round). The ctest dist.netns.elastic.<CASE>:
#   tests/netns/netns.sh --nodes 4 -- sh tests/netns/elastic.sh CASE DDPRUN CHECKPOINT_WORKER
#   membership  agents on nodes 0-2: round R (0, or 1 when an agent started after round 0's last call)
#               has 3 nodes; kill -9 of node 2's ddprun mid-round: the survivors' round R+1 has 2 nodes,
#               started within a bound; then an agent on node 3 joins: round R+2 has 3 nodes and the job
#               finishes, every rank of it equal to single-process training. With --max-restarts 1 the
#               job can finish only if the joins did not count.
#   host_lost   agents on nodes 0-2; kill -9 of node 0's ddprun (the store's host) mid-round: nodes 1
#               and 2 end within a bound, non-zero, saying that the store's host is gone.
#   by_address  an elastic PyTorchJob's variables only (PET_NNODES=2:4, PET_RDZV_ENDPOINT, ...; no
#               --nnodes, --node-rank or --master-addr): the agent on node 0, whose address the endpoint
#               is, serves the store; a second agent on node 0 finds the port taken and joins it; with
#               node 1's agent the job finishes at 3 nodes, equal to one process.
set -u
case_=$1; ddprun=$2; worker=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/ddp-elastic.XXXXXX")
pids=""
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
show() { for f in "$work"/out.*; do echo "--- $f"; cat "$f"; done; }
fail() { show; echo "FAIL: $*"; exit 1; }
[ "${DDP_NETNS_NODES:-2}" -ge 4 ] || fail "run me inside tests/netns/netns.sh --nodes 4"
now_ms() { date +%s%3N; }
DDP_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n'); export DDP_TOKEN
export DDP_TIMEOUT=30s
hb=3; last_call=1; grace=1
# start_node N [--node-rank 0]: ddprun on node N in the background; output in $work/out.N, exit code
# in $work/rc.N, end time (unix ms) in $work/end.N; its ddprun's pid in $work/pid.N.
# start_agent N OUT [ddprun options]: as start_node, the job given by the options alone.
start_node() {
  n=$1; shift
  start_agent "$n" "$n" --nnodes 2:4 "$@" --max-restarts 1 --master-addr "$DDP_NETNS_ADDR0" --master-port 29500
}
start_agent() {
  n=$1; out=$2; shift 2
  eval "ifc=\$DDP_NETNS_IF$n; ns=\$DDP_NETNS$n"
  (
    GLOO_SOCKET_IFNAME=$ifc ip netns exec "$ns" timeout -k 5 90 "$ddprun" "$@" --rdzv-last-call $last_call \
      --heartbeat-timeout $hb --grace-period $grace "$worker" elastic "$work" 300 10 15 > "$work/out.$out" 2>&1 &
    echo $! > "$work/wrapper.$out"
    wait $!
    echo $? > "$work/rc.$out"
    now_ms > "$work/end.$out"
  ) &
  pids="$pids $!"
}
# until_seen FILE PATTERN SECONDS: waits for a line of FILE to match.
until_seen() {
  i=0
  until grep -q "$2" "$1" 2>/dev/null; do
    i=$((i + 1))
    [ $i -lt $(( $3 * 20 )) ] || fail "no line matching '$2' in $1 within $3 s"
    sleep 0.05
  done
}
# The ddprun process itself: `timeout`'s child (ip netns exec execs).
ddprun_pid() {
  t=$(cat "$work/wrapper.$1")
  for c in $(cat /proc/"$t"/task/*/children 2>/dev/null); do echo "$c"; return; done
}
wait_all() { for p in $pids; do wait "$p"; done; pids=""; }
count() { cat "$work"/out.* | grep -c "$1"; }

t0=$(now_ms)
if [ "$case_" = by_address ]; then
  export PET_NNODES=2:4 PET_RDZV_ENDPOINT="$DDP_NETNS_ADDR0:29500" PET_RDZV_BACKEND=c10d PET_RDZV_ID=ddp-test \
    PET_MAX_RESTARTS=1 PET_NPROC_PER_NODE=1
  start_agent 0 0
  until_seen "$work/out.0" "serving the store on $DDP_NETNS_ADDR0:29500" 30
  start_agent 0 0b
  start_agent 1 1
  wait_all
  for n in 0 0b 1; do [ "$(cat "$work/rc.$n")" -eq 0 ] || fail "agent $n's ddprun exited with $(cat "$work/rc.$n")"; done
  [ "$(count 'serving the store on')" -eq 1 ] || fail "not exactly one agent served the store"
  grep -q "not serving the store (.*already in use.*): joining the agent that does" "$work/out.0b" ||
    fail "the second agent on node 0 did not join the first"
  # Rounds may have started with fewer agents (a loaded machine); the last has all three.
  [ "$(count 'RESULT ok phase=elastic rank=[0-2] size=3 step=300 ')" -eq 3 ] || fail "3 ranks did not finish equal to one process"
  echo "ok: by_address: node 0 served the store by its address, 3 nodes finished ($(( $(now_ms) - t0 )) ms)"
  exit 0
fi
start_node 0 --node-rank 0
sleep 0.2
start_node 1
start_node 2
until_seen "$work/out.0" "^\[0\] STEP [0-9]* world=3" 30
# Round 0 unless a loaded machine started an agent after its last call (a join then made round 1).
r=$(sed -n 's/^\[0\] ELASTIC round=\([0-9]*\) world=3 .*/\1/p' "$work/out.0" | tail -1)
case "$case_" in
membership)
  victim=$(ddprun_pid 2)
  [ -n "$victim" ] || fail "no ddprun process on node 2"
  kill -9 "$victim"
  killed=$(now_ms)
  until_seen "$work/out.0" "round $((r + 1)): 2 nodes" 30
  restarted=$(( $(now_ms) - killed ))
  # Node 2's ranks die with their agent at once; node 0 waits out node 2's heartbeat for its word
  # on the round, then the last call of round 1: so hb + last call, plus the grace periods and load.
  bound=$(( (hb + last_call + 2 * grace + 5) * 1000 ))
  [ "$restarted" -le "$bound" ] || fail "round $((r + 1)) started ${restarted} ms after the kill (bound $bound ms)"
  until_seen "$work/out.0" "^\[0\] STEP [0-9]* world=2" 30
  start_node 3
  wait_all
  for n in 0 1 3; do [ "$(cat "$work/rc.$n")" -eq 0 ] || fail "node $n's ddprun exited with $(cat "$work/rc.$n")"; done
  [ "$(cat "$work/rc.2")" -eq 137 ] || fail "node 2's ddprun was not the one killed (exit $(cat "$work/rc.2"))"
  # The world size every rank saw, round by round.
  r1=$((r + 1)); r2=$((r + 2))
  [ "$(count "ELASTIC round=$r world=3 ")" -eq 3 ] || fail "round $r did not start 3 ranks of world 3"
  [ "$(count "ELASTIC round=$r1 world=2 ")" -eq 2 ] || fail "round $r1 did not start 2 ranks of world 2"
  [ "$(count "ELASTIC round=$r2 world=3 ")" -eq 3 ] || fail "round $r2 did not start 3 ranks of world 3"
  [ "$(count "ELASTIC round=$((r + 3))")" -eq 0 ] || fail "a round $((r + 3)) was started"
  grep -q "^\[2\] ELASTIC round=$r2 world=3 rank=2 group_rank=2 " "$work/out.3" || fail "the newcomer was not node 2 of round $r2"
  grep -q "round $r1 ended (a new node asked to join.*failures counted: 1 of --max-restarts 1" "$work/out.0" ||
    fail "node 0 did not end round $r1 for the join, or counted it"
  # Each round resumed from the last checkpoint, and the end equals single-process training.
  [ "$(count 'RESULT ok phase=elastic rank=[0-2] size=3 step=300 ')" -eq 3 ] || fail "round $r2's 3 ranks did not finish equal to one process"
  echo "ok: membership: 3 nodes in round $r, kill -9 of node 2's agent, round $r1 at 2 nodes after $restarted ms, a join, round $r2 at 3 nodes ($(( $(now_ms) - t0 )) ms)"
  ;;
host_lost)
  victim=$(ddprun_pid 0)
  [ -n "$victim" ] || fail "no ddprun process on node 0"
  kill -9 "$victim"
  killed=$(now_ms)
  wait_all
  # The ranks die with node 0's at once, the others' ranks fail on it, their agents find the store
  # gone: the heartbeat timeout bounds a silent store, 2 grace periods the ranks' stop.
  bound=$(( (hb + 2 * grace + 5) * 1000 ))
  for n in 1 2; do
    rc=$(cat "$work/rc.$n"); end=$(( $(cat "$work/end.$n") - killed ))
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || fail "node $n's ddprun exited with $rc"
    [ "$end" -le "$bound" ] || fail "node $n's ddprun ended $end ms after node 0's was killed (bound $bound ms)"
    grep -q "the store's host (node 0, $DDP_NETNS_ADDR0:29500) is gone" "$work/out.$n" ||
      fail "node $n did not say that the store's host is gone"
    echo "node $n: ended $end ms after the kill, exit $rc"
  done
  echo "ok: host_lost ($(( $(now_ms) - t0 )) ms)"
  ;;
*) echo "unknown case $case_"; exit 2 ;;
esac
