#!/bin/sh
# ddprun on two nodes: runs inside tests/netns/netns.sh (two network namespaces joined by a
# veth pair), one `ddprun --nnodes 2 --node-rank N --nproc-per-node 2 --master-addr <node 0>`
# per namespace, Gloo on the veth (GLOO_SOCKET_IFNAME). The ctest dist.netns.<CASE>:
#   tests/netns/netns.sh -- sh tests/netns/two_nodes.sh CASE DDPRUN PROGRAMS...
#   two_nodes  (PROGRAMS: scenario_worker dist_collectives dist_data_parallel [dist_shm]) a 4-rank all_reduce (scenario_worker ok; dist_collectives' float all_reduce),
#              and DDP steps equal to one process on the concatenated batch (dist_data_parallel)
#   hybrid     (dist_hybrid_sharded [dist_subgroups]) hybrid sharding with the shard groups built from the topology (each node's
#              2 ranks) and the replicate groups across the nodes: a subgroup all_reduce across the nodes, and
#              steps equal to DDP + the whole optimizer and to flat sharding; then every S x R layout by explicit groups;
#              and the subgroup suite (new_group, split, nested, in flight beside the job's group) across the nodes;
#              [dist_subgroup_shm] subgroups through shared memory across the nodes, and the layouts that stay on TCP
#   example    (fashion_mnist) examples/fashion_mnist for 200 steps (4 ranks x 16 samples), test accuracy > 0.70
#   restart    (fashion_mnist) ddprun --max-restarts 1 on both nodes; rank 3 (node 1) is killed (SIGKILL) mid-epoch
#              2 of 3: both nodes restart, resume from the mid-epoch checkpoint, and the final checkpoint is
#              byte-identical to an uninterrupted run's on the same two nodes
#   unreachable (scenario_worker) node 1's ranks give Gloo an address node 0 cannot route to: every rank's
#              error names the peer rank and the address its pair could not connect with
#   link_down  (scenario_worker) the veth goes down in node 1 mid-run (DDP_TIMEOUT=5s): every rank ends with an
#              error that names a rank of the other node as unreachable, and both ddpruns exit non-zero
#              within DDP_TIMEOUT + 5 s of the link going down
set -u
case_=$1; ddprun=$2; shift 2
work=$(mktemp -d "${TMPDIR:-/tmp}/ddp-netns.XXXXXX")
pids=""
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
fail() { echo "FAIL: $*"; exit 1; }
[ -n "${DDP_NETNS0:-}" ] || fail "run me inside tests/netns/netns.sh"
now_ms() { date +%s%3N; }
# One job token for both nodes, as a user would export it on each.
DDP_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n'); export DDP_TOKEN
export DDP_TIMEOUT=${DDP_TIMEOUT:-30s}

# start_nodes NAME PROGRAM [ARGS...]: ddprun on both nodes in the background; output in
# $work/NAME.N, exit code and end time (unix ms) in $work/NAME.N.rc and .end, pids in $pids.
# The namespaces are fresh, so any fixed port is free; 29500 is ddprun's multi-node default.
start_nodes() {
  name=$1; shift
  pids=""
  for n in 0 1; do
    eval "ifc=\$DDP_NETNS_IF$n; ns=\$DDP_NETNS$n"
    (
      GLOO_SOCKET_IFNAME=$ifc ip netns exec "$ns" timeout -k 5 120 "$ddprun" --nnodes 2 --node-rank $n \
        --nproc-per-node 2 --master-addr "$DDP_NETNS_ADDR0" --master-port 29500 "$@" > "$work/$name.$n" 2>&1
      echo $? > "$work/$name.$n.rc"
      now_ms > "$work/$name.$n.end"
    ) &
    pids="$pids $!"
  done
}
# wait_nodes NAME: waits for both; prints their output; fails unless both exit 0.
wait_nodes() {
  for p in $pids; do wait "$p"; done
  pids=""
  rc=$(( $(cat "$work/$1.0.rc") | $(cat "$work/$1.1.rc") ))
  cat "$work/$1.0" "$work/$1.1"
  [ $rc -eq 0 ] || fail "$1: a node's ddprun exited with $rc"
}
run_nodes() { start_nodes "$@"; wait_nodes "$1"; }
count() { cat "$work/$1.0" "$work/$1.1" | grep -c "$2"; }

case "$case_" in
two_nodes)
  t0=$(now_ms)
  # scenario_worker ok: all_reduce of the ranks (0+1+2+3) on a group of 4, then a barrier.
  run_nodes ok "$1" ok
  [ "$(count ok 'RESULT ok rank=[0-3] size=4')" -eq 4 ] || fail "expected 4 ranks of one 4-rank group"
  for r in 0 1; do grep -q "^\[$r\] RESULT ok" "$work/ok.0" || fail "rank $r did not run on node 0"; done
  for r in 2 3; do grep -q "^\[$r\] RESULT ok" "$work/ok.1" || fail "rank $r did not run on node 1"; done
  # Every reduce op on floats against its closed form, across the link.
  run_nodes coll "$2" -tc='all_reduce float'
  [ "$(count coll 'Status: SUCCESS')" -eq 4 ] || fail "dist_collectives did not pass on 4 ranks"
  # DDP: 4 ranks, each its shard, equal one process on the whole batches (every bucketing policy).
  run_nodes ddp "$3" -tc='R ranks equal one process*,equivalence in double*'
  [ "$(count ddp 'test cases: *2 | *2 passed')" -eq 4 ] || fail "dist_data_parallel did not pass 2 cases on 4 ranks"
  # Hierarchical all_reduce (PROGRAM 4, dist_shm): shm among each node's 2 ranks, Gloo between the
  # nodes' leaders; every dtype and op against the rank-order sum, across chunk ends.
  if [ $# -ge 4 ]; then
    run_nodes shm "$4"
    [ "$(count shm 'Status: SUCCESS')" -eq 4 ] || fail "dist_shm did not pass on 2 nodes x 2 ranks"
  fi
  echo "ok: two_nodes in $(( $(now_ms) - t0 )) ms"
  ;;
hybrid)
  t0=$(now_ms)
  run_nodes hyb "$1" -tc='hybrid from the topology*,hybrid equals DDP*'
  [ "$(count hyb 'test cases: *2 | *2 passed')" -eq 4 ] || fail "dist_hybrid_sharded did not pass 2 cases on 2 nodes x 2 ranks"
  if [ $# -ge 2 ]; then
    # Less its one-node topology case (dist_hybrid_sharded checked the subgroups' topology above).
    run_nodes sub "$2" "--test-case-exclude=*topology() describes the subgroup*"
    [ "$(count sub 'Status: SUCCESS')" -eq 4 ] || fail "dist_subgroups did not pass on 2 nodes x 2 ranks"
  fi
  if [ $# -ge 3 ]; then
    # Subgroups through shared memory across the nodes: a group of whole nodes listed backwards
    # takes it (its own leaders' mesh), an uneven and an interleaved one stay on TCP and say why.
    export DDP_DEBUG=INFO
    run_nodes shm "$3"
    unset DDP_DEBUG
    [ "$(count shm 'Status: SUCCESS')" -eq 4 ] || fail "dist_subgroup_shm did not pass on 2 nodes x 2 ranks"
    # The uneven group's 3 members and 2 of the interleaved one's find their own layout unfit; the
    # interleaved one's other 2 fit alone and say that another member voted no.
    [ "$(count shm 'reduces over TCP, not the node.s shared memory: its layout is not whole nodes')" -ge 5 ] &&
      [ "$(count shm 'reduces over TCP, not the node.s shared memory: another member voted against it')" -ge 2 ] ||
      fail "expected the uneven and interleaved groups' members to say why they stay on TCP"
  fi
  echo "ok: hybrid on two nodes in $(( $(now_ms) - t0 )) ms"
  ;;
example)
  data=${DDP_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
  [ -f "$data/train-images-idx3-ubyte.gz" ] || { echo "SKIP: no Fashion-MNIST in $data (apt-get install dataset-fashion-mnist)"; exit 77; }
  t0=$(now_ms)
  # 12800 samples / (4 ranks x 16) = 200 steps.
  run_nodes ex "$1" --data "$data" --epochs 1 --limit 12800 \
    --batch-size 16 --json --step-log "$work/steps"
  steps=$(wc -l < "$work/steps")
  [ "$steps" -eq 200 ] || fail "expected 200 steps, rank 0 logged $steps"
  acc=$(sed -n 's/.*"epoch":1,.*"test_acc":\([0-9.]*\).*/\1/p' "$work/ex.0")
  [ -n "$acc" ] || fail "no JSON line for epoch 1 from rank 0"
  awk -v a="$acc" 'BEGIN { exit !(a > 0.70) }' || fail "test accuracy $acc is not above 0.70"
  echo "ok: example, $steps steps on two nodes, test accuracy $acc, in $(( $(now_ms) - t0 )) ms"
  ;;
restart)
  data=${DDP_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
  [ -f "$data/train-images-idx3-ubyte.gz" ] || { echo "SKIP: no Fashion-MNIST in $data (apt-get install dataset-fashion-mnist)"; exit 77; }
  t0=$(now_ms)
  # 2560 samples / (4 ranks x 64) = 10 steps an epoch. Rank 0 (node 0) writes the checkpoints; the
  # namespaces share the file system, as nodes share a cluster file system.
  common="--data $data --epochs 3 --limit 2560 --batch-size 64 --json"
  run_nodes straight "$1" $common --checkpoint "$work/straight"
  # Step 16 is batch 6 of epoch 2 (0-based: epoch 1, batch 6); --checkpoint-every 4 saved right before.
  export FASHION_MNIST_TEST_KILL=3:16
  run_nodes restarted --max-restarts 1 --grace-period 3 "$1" $common --checkpoint "$work/ck" --checkpoint-every 4
  unset FASHION_MNIST_TEST_KILL
  grep -q "rank 3 kills itself after step 16" "$work/restarted.1" || fail "the test kill did not happen"
  for n in 0 1; do
    grep -q "ddprun: restarting every rank: round 1" "$work/restarted.$n" || fail "node $n's ddprun did not restart"
  done
  grep -q "^\[0\] resumed from $work/ck at epoch 1, batch 6" "$work/restarted.0" || fail "round 1 did not resume at epoch 1, batch 6"
  cmp "$work/straight" "$work/ck" || fail "the final parameters differ from the uninterrupted run"
  echo "ok: restart on two nodes: killed rank 3 mid-epoch 2, both nodes restarted, final checkpoint identical ($(( $(now_ms) - t0 )) ms)"
  ;;
link_down)
  export DDP_TIMEOUT=5s DDP_TEST_LOOP_SECONDS=60
  limit_ms=$(( 5000 + 5000 ))
  # scenario_worker loop: all_reduce 1 MiB every 2 ms until something fails.
  start_nodes loop "$1" loop
  i=0
  until [ "$(count loop READY)" -eq 4 ]; do
    i=$((i + 1))
    [ $i -lt 300 ] || { cat "$work/loop.0" "$work/loop.1"; fail "the 4 ranks did not start within 30 s"; }
    sleep 0.1
  done
  sleep 0.5 # mid-run: collectives in flight
  down=$(now_ms)
  ip netns exec "$DDP_NETNS1" ip link set "$DDP_NETNS_IF1" down || fail "ip link set $DDP_NETNS_IF1 down"
  for p in $pids; do wait "$p"; done
  pids=""
  cat "$work/loop.0" "$work/loop.1"
  ends=""
  for n in 0 1; do
    rc=$(cat "$work/loop.$n.rc"); end=$(( $(cat "$work/loop.$n.end") - down ))
    ends="$ends node $n: ${end} ms (exit $rc);"
    [ "$rc" -ne 0 ] || fail "node $n's ddprun exited 0 after its link went down"
    [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || fail "node $n's ddprun hung (timeout killed it)"
    [ "$end" -le "$limit_ms" ] || fail "node $n's ddprun ended $end ms after the link went down (limit $limit_ms)"
  done
  echo "link down; ddprun ended:$ends"
  # Every rank reported a ddp::error that names another rank, within the bound.
  for r in 0 1 2 3; do
    line=$(cat "$work/loop.0" "$work/loop.1" | grep "^\[$r\] RESULT kind=")
    [ -n "$line" ] || fail "rank $r reported no ddp::error"
    msg=$(cat "$work/loop.0" "$work/loop.1" | grep "^\[$r\] MESSAGE")
    echo "$msg" | grep -q "rank $r: " || fail "rank $r's message does not say which rank it is: $msg"
    # Node 0's ranks lost node 1's (2, 3) and the other way round.
    case $r in 0|1) lost='ranks\{0,1\} [2-3]' ;; *) lost='rank [0-1]' ;; esac
    echo "$msg" | grep -q "$lost" || fail "rank $r's message names no rank of the other node: $msg"
    # What was lost: a host or link, not a stopped process (the store's keepalive tells them apart).
    echo "$msg" | grep -q "is unreachable: .*(network cut or host down)" ||
      fail "rank $r's message does not say the other node is unreachable: $msg"
    wall=$(echo "$line" | sed -n 's/.*wall_ms=\([0-9]*\).*/\1/p')
    [ $(( wall - down )) -le "$limit_ms" ] || fail "rank $r reported $(( wall - down )) ms after the link went down"
    echo "rank $r: error after $(( wall - down )) ms"
  done
  echo "ok: link_down"
  ;;
unreachable)
  # Node 1's ranks listen for Gloo on an address node 0 has no route to (a second veth
  # pair inside node 1, 10.230.X.1/24); the store is reached over the shared link as
  # usual. Node 0's ranks dial node 1's (the larger address dials, Gloo's rule) and fail
  # at once, and say so to the store. Node 1's ranks hear of the first to report from
  # their peer-failure watch (detail/fault/connect_interrupt.hpp): they stop waiting for it, and
  # wait for the other node-0 rank, which failed too but reported nothing more, until
  # no connection has formed for the mesh's grace (2 s), then fail too, naming the
  # failed node-0 rank and its reason.
  # Before, they waited DDP_TIMEOUT (7.05 s at 6 s), and Gloo alone 5 x DDP_TIMEOUT.
  # Every rank's error names the rank and the address it could not connect with.
  export DDP_TIMEOUT=10s
  x=${DDP_NETNS_ADDR0#10.231.}; x=${x%.1}
  hidden=10.230.$x.1
  { ip -n "$DDP_NETNS1" link add ddpu0 type veth peer name ddpu1 &&
    ip -n "$DDP_NETNS1" addr add "$hidden/24" dev ddpu0 &&
    ip -n "$DDP_NETNS1" link set ddpu0 up && ip -n "$DDP_NETNS1" link set ddpu1 up; } ||
    fail "could not add the unrouted interface to node 1"
  DDP_NETNS_IF1=ddpu0
  run_nodes unreachable "$1" ok
  for r in 0 1 2 3; do
    msg=$(cat "$work/unreachable.0" "$work/unreachable.1" | grep "^\[$r\] MESSAGE")
    [ -n "$msg" ] || fail "rank $r reported no ddp::error"
    echo "$msg" | grep -q "rank $r: Gloo could not connect to its peers" || fail "rank $r: $msg"
    ms=$(cat "$work/unreachable.0" "$work/unreachable.1" | sed -n "s/^\[$r\] RESULT kind=.* ms=\([0-9]*\) .*/\1/p")
    echo "rank $r: failed after ${ms:-?} ms"
    case $r in
    0|1) [ -n "$ms" ] && [ "$ms" -le 6000 ] || fail "rank $r failed after ${ms:-?} ms, not at once (DDP_TIMEOUT 10 s)"
         # A failed rank keeps its pairs through its look for a lost peer, so the other
         # node-0 rank's dial to it connects: both fail on node 1's address.
         echo "$msg" | grep -q "connecting to rank [23] (its pair at \[$hidden\]:[0-9]*, " ||
           fail "rank $r's message does not name the node-1 rank and address it could not reach: $msg" ;;
    *) # about a second after node 0's report, plus the grace: well before DDP_TIMEOUT (10 s)
       [ -n "$ms" ] && [ "$ms" -le 6000 ] || fail "rank $r failed after ${ms:-?} ms: not stopped by node 0's failure (DDP_TIMEOUT 10 s)"
       echo "$msg" | grep -q "waiting for a connection from rank [01] (its pair at \[$DDP_NETNS_ADDR0\]:[0-9]*, " ||
         fail "rank $r's message does not name the node-0 rank and address it waited for: $msg"
       echo "$msg" | grep -q "Gloo could not connect to its peers: rank [01] failed: .*Network is unreachable.*stopped: the store reports rank [01] lost" ||
         fail "rank $r's message does not name the lost node-0 rank and its reason: $msg" ;;
    esac
  done
  # The ports are real ones (Gloo's own Address::str() prints them byte-swapped): the
  # port rank 2 waited on for rank 0 is the one rank 0 gave as its own, dialing rank 2.
  m0=$(grep "^\[0\] MESSAGE" "$work/unreachable.0")
  m2=$(grep "^\[2\] MESSAGE" "$work/unreachable.1")
  if echo "$m0" | grep -q "connecting to rank 2 " && echo "$m2" | grep -q "from rank 0 "; then
    q=$(echo "$m0" | sed -n 's/.*this rank.s at \[[0-9.]*\]:\([0-9]*\)).*/\1/p')
    p=$(echo "$m2" | sed -n 's/.*from rank 0 (its pair at \[[0-9.]*\]:\([0-9]*\),.*/\1/p')
    [ -n "$p" ] && [ "$p" = "$q" ] || fail "rank 2 waited on rank 0's port ${p:-?}, rank 0 gave ${q:-?}"
    echo "rank 2 waited on the port rank 0 gave: $p"
  fi
  echo "ok: unreachable"
  ;;
*) echo "unknown case $case_"; exit 2 ;;
esac
