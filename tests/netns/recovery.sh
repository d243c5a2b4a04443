#!/bin/sh
# dist.netns.recovery: in-process recovery across two nodes. Runs inside tests/netns/netns.sh
# (two network namespaces joined by a veth pair): one `ddprun --in-process-recovery --nnodes 2
# --nproc-per-node 2` per node, 4 ranks of elastic_recovery_worker (ddp::elastic::run, DDP + SGD
# on a global batch of 6, a commit every 10 steps, Gloo on the veth). The first victim named (or
# $trigger_rank) pauses after its commit of step 30 (ELASTIC_PAUSE: no rank can finish before
# the kill, however loaded the machine, and step 30 is the last commit), then one case each:
#   rank_node1  kill -9 of rank 3 (node 1): ranks 0-2 go on at world 3; rank 2 then exits 7
#               after finishing well (ELASTIC_EXIT), and both nodes' ddprun must exit 7
#   rank_node0  kill -9 of ranks 0 and 1 (all of node 0's, the store's host): ranks 2 and 3 go
#               on at world 2 while node 0's ddprun serves the store with no rank of its own
#   node1_lost  kill -9 of node 1's ddprun and both its ranks: ranks 0 and 1 go on at world 2,
#               and node 0's ddprun serves until node 1's heartbeat lapses, then exits 0; node 1's
#               agent started again meanwhile, without --max-restarts, is refused (exit 2),
#               starting no rank
#   stuck_left_out  rank 3 stuck outside collectives (DDP_TIMEOUT=2s) when rank 1 is killed: the
#               meeting leaves it out, node 1's ddprun kills it at its bound (2 x DDP_TIMEOUT +
#               10 s, ~14 s) while rank 2 goes on: ranks 0 and 2 finish at world 2
#   host_lost   kill -9 of node 0's ddprun and both its ranks: node 1's ddprun ends its ranks and
#               exits non-zero, saying the store's host was lost
# The survivors must finish in the processes that started (PIDs printed at start and at the
# end), in generation 1, with the parameters of single-process training (the worker's oracle,
# 1e-5 relative) and of an uninterrupted run on the same two nodes (TOL), and every live
# node's ddprun must exit 0 (7 in rank_node1), with no verdict of its own node's beside the job's.
# Prints RECOVERY_MS: the kill to the survivors' first step.
#   twice       (only when named) rank 2 killed after step 30, then rank 1 after its commit of
#               world 3's step 60 (paused there): ranks 0 and 3 go on at generation 2 of world 2
#   link_down   (only when named) node 1's veth goes down while rank 2 pauses: node 0's ranks go
#               on at world 2 and its ddprun exits 0; node 1's ddprun exits non-zero, saying the
#               store's host was lost
#   user_stop   (only when named) while rank 3 pauses, four jobs: SIGTERM to node 1's ddprun;
#               to node 0's; to node 0's once its ranks were killed (it waits for the job's end
#               with none); and, node 0 again rankless and node 1's ranks deaf to SIGTERM, to
#               node 1's ddprun then node 0's 0.3 s later (each agent its own signal, as a
#               scheduler sends them): every rank stops and both nodes' ddprun exit 143, naming
#               the first signal; then node 0's ddprun stopped (SIGSTOP) and node 1's signalled,
#               at once and 0.5 s later (inside a look at the silent store): node 1's ddprun
#               exits 143, naming the stop, not the lost host
#   joiner      (only when named) --max-restarts 1 on both nodes: rank 3 (node 1) killed after
#               step 30; ranks 0-2 go on at world 3, node 1's ddprun starts a joiner in rank 3's
#               slot, the running ranks admit it at a commit and send it their state: generation
#               2 is world 4 again, every rank (the joiner too) ends on the uninterrupted run, and
#               both nodes' ddprun give the one verdict, 0, of generation 2's 4 ranks
#   node_rejoin (only when named) --max-restarts 1: node 1's ddprun and both its ranks killed
#               after step 30; ranks 0 and 1 go on at world 2, node 1's agent started again
#               rejoins: its ranks start as joiners, are admitted at a commit and sent the
#               state; generation 2 is world 4, every rank ends on the uninterrupted run, both
#               agents give generation 2's verdict. Prints REJOIN_MS: the agent's start to the
#               first step of world 4
#   rejoined_lost (only when named) node_rejoin's start, then node 1's rejoined agent and its
#               joiners killed after step 60 (world 4): ranks 0 and 1 go on at world 2
#               (generation 3), a third agent for node 1 is refused (--max-restarts 1 spent)
#   rejoin_ended (only when named) an agent for node 1 started beside the live one is refused
#               (2); node 1 then lost whole, rank 0 held after its loop returned: node 1's agent
#               started again exits 3, starting no rank, and node 0's ddprun exits 0
#   tests/netns/netns.sh -- sh tests/netns/recovery.sh DDPRUN ELASTIC_RECOVERY_WORKER [CASE...]
# (every case but twice, link_down, user_stop, joiner and the rejoins by default; the uninterrupted run first in any
# case). DDP_KEEP=1 keeps the work folder (the nodes' output: NAME.0, NAME.1) for a look.
set -u
ddprun=$1; worker=$2; shift 2
cases=$*
work=$(mktemp -d "${TMPDIR:-/tmp}/ddp-netns-recovery.XXXXXX")
pids=""
cleanup() {
  for p in $pids; do kill -9 "$p" 2>/dev/null; done
  [ -n "${DDP_KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.[01]; do echo "== $f"; cat "$f"; done
  exit 1
}
[ -n "${DDP_NETNS0:-}" ] || fail "run me inside tests/netns/netns.sh"
DDP_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n'); export DDP_TOKEN
timeout=${DDP_TIMEOUT:-30s}
export DDP_TIMEOUT=$timeout
# Only float summation order differs from the uninterrupted run (rings of 3 or 2 against 4,
# uneven sample weights): the single-node test saw up to 1.2e-7; a restore that skips a step
# gives ~1e-3 (docs/elastic.md, In-process recovery).
tol=1e-5
total=120 every=10 step_ms=10
gen=1
trigger_rank= # who pauses after step 30, its PAUSED line starting the kill (unset: the first rank victim)
more_pauses=  # ELASTIC_PAUSE specs beside that one
verdict_nodes="0 1" # the nodes whose ddprun lives to give the job's verdict
wrap=         # a program the worker runs under (deaf.sh: SIGTERM ignored)
restarts=     # ddprun flags beside --in-process-recovery (joiner: --max-restarts 1)
before_kill=  # a function run once the trigger paused, before the kill

# start NAME: ddprun on both nodes in the background; output in $work/NAME.N, agents' pids in
# $agent0 and $agent1 (`ip netns exec` execs ddprun in place).
start() {
  name=$1
  mkdir -p "$work/$name"
  pids=""
  for n in 0 1; do
    eval "ifc=\$DDP_NETNS_IF$n; ns=\$DDP_NETNS$n"
    GLOO_SOCKET_IFNAME=$ifc ip netns exec "$ns" "$ddprun" --in-process-recovery $restarts --heartbeat-timeout 2 \
      --grace-period 1 --nnodes 2 --node-rank $n --nproc-per-node 2 --master-addr "$DDP_NETNS_ADDR0" \
      --master-port 29500 --no-prefix $wrap "$worker" recover "$work/$name" $total $every $step_ms \
      >"$work/$name.$n" 2>&1 &
    eval "agent$n=\$!"
    pids="$pids $!"
  done
}
# finish N: waits for node N's ddprun (at most 60 s); sets rc.
finish() {
  eval "p=\$agent$1"
  i=0
  while kill -0 "$p" 2>/dev/null; do
    i=$((i + 1)); [ $i -le 600 ] || fail "$name: node $1's ddprun did not end within 60 s"
    sleep 0.1
  done
  wait "$p"; rc=$?
}
pid_of() { sed -n "s/^PID rank=$1 pid=\([0-9]*\)\$/\1/p" "$work/$name.0" "$work/$name.1"; }

# kill_after_step_30 NAME RANKS... [agent0|agent1|link1]: once the first rank named (or
# $trigger_rank) paused after its commit of step 30, kill -9 of those ranks (and that node's
# ddprun), or node 1's link down; sets last_step (30: the pause holds every rank there) and kill_ns.
kill_after_step_30() {
  name=$1; shift
  paused=$trigger_rank
  if [ -z "$paused" ]; then
    for v in "$@"; do case $v in [0-9]) paused=$v; break ;; esac; done
  fi
  [ -n "$paused" ] || fail "$name: no rank to pause after step 30"
  export ELASTIC_PAUSE=$paused:30:600000${more_pauses:+,$more_pauses}
  start "$name"
  unset ELASTIC_PAUSE
  i=0
  trigger="^PAUSED rank=$paused step=30\$"
  until cat "$work/$name.0" "$work/$name.1" 2>/dev/null | grep -q "$trigger"; do
    i=$((i + 1)); [ $i -le 600 ] || fail "$name: '$trigger' not seen within 30 s"
    sleep 0.05
  done
  victims="" link_down=
  for v in "$@"; do
    case $v in
    agent*) eval "victims=\"\$victims \$$v\"" ;;
    link1) link_down=1; continue ;;
    *) p=$(pid_of "$v"); [ -n "$p" ] || fail "$name: rank $v printed no PID"; victims="$victims $p" ;;
    esac
  done
  [ -z "$before_kill" ] || $before_kill
  last_step=30
  kill_ns=$(date +%s%N)
  if [ -n "$link_down" ]; then
    ip netns exec "$DDP_NETNS1" ip link set "$DDP_NETNS_IF1" down || fail "$name: ip link set $DDP_NETNS_IF1 down"
  else
    kill -9 $victims || fail "$name: a victim had ended before the kill (a loaded machine: rerun)"
  fi
}

# survived NAME WORLD RANKS...: those ranks finished ok in their own processes at generation $gen
# (1 unless set) of WORLD, from the last commit before the kill or a later one, equal to the
# uninterrupted run.
survived() {
  name=$1 world=$2; shift 2
  for r in "$@"; do
    pid=$(pid_of "$r")
    cat "$work/$name.0" "$work/$name.1" | grep -q "^RESULT ok job_rank=$r pid=$pid generation=$gen world=$world " ||
      fail "$name: rank $r did not finish ok in its own process ($pid) at generation $gen of world $world"
    d=$("$worker" compare "$work/$name/params.$r" "$work/ref/params.$r" | sed -n 's/^DIFF //p')
    echo "$name: rank $r against the uninterrupted run: $d (tolerance $tol)"
    awk -v d="$d" -v t="$tol" 'BEGIN { exit !(d <= t) }' || fail "$name: rank $r differs from the uninterrupted run by $d"
  done
  [ "$(cat "$work/$name.0" "$work/$name.1" | grep -c "^RECOVERED generation=$gen world=$world ")" -eq $# ] ||
    fail "$name: not every survivor recovered at world $world"
  for f in $(cat "$work/$name.0" "$work/$name.1" | sed -n "s/^RECOVERED generation=$gen .*from_step=\([0-9]*\) .*/\1/p"); do
    [ "$f" -ge "$last_step" ] || fail "$name: resumed from step $f, older than the last commit before the kill ($last_step)"
  done
  one_verdict "$name" $verdict_nodes
  first=$(cat "$work/$name.0" "$work/$name.1" | sed -n "s/^RECOVERED generation=$gen .*first_step_ns=\([0-9]*\)\$/\1/p" | sort -n | head -1)
  echo "RECOVERY_MS $(( (first - kill_ns) / 1000000 )) ($name: the kill to the first step of world $world)"
}

# one_verdict NAME [NODE...]: each node named (both by default) gave the job's verdict exactly once,
# and no node a verdict of its own node's ranks.
one_verdict() {
  v=$1; shift
  for n in 0 1; do
    ! grep -E "the first rank to fail was|the others recovered in their processes" "$work/$v.$n" ||
      fail "$v: node $n's ddprun gave its own node's verdict beside the job's"
  done
  for n in ${*:-0 1}; do
    [ "$(grep -c '(ddprun exits with [0-9]*; --in-process-recovery)' "$work/$v.$n")" -eq 1 ] ||
      fail "$v: node $n's ddprun did not give the job's verdict exactly once"
  done
}

# The uninterrupted run on the same two nodes: the reference parameters.
start ref
finish 0; rc0=$rc; finish 1
[ $rc0 -eq 0 ] && [ $rc -eq 0 ] || fail "ref: the uninterrupted run exited with $rc0 and $rc"
[ "$(cat "$work/ref.0" "$work/ref.1" | grep -c '^RESULT ok job_rank=[0-3] .*generation=0 world=4 ')" -eq 4 ] ||
  fail "ref: not every rank finished ok at world 4"

# A survivor, rank 2, exits 7 after finishing well: the job's verdict, on both nodes, is its code.
case_rank_node1() {
  export ELASTIC_EXIT=2:7
  kill_after_step_30 rank_node1 3
  unset ELASTIC_EXIT
  finish 0; rc0=$rc; finish 1
  [ $rc0 -eq 7 ] && [ $rc -eq 7 ] || fail "rank_node1: the nodes' ddprun exited with $rc0 and $rc, not 7 (rank 2's code)"
  for n in 0 1; do
    grep -q "the job failed: rank 2 of generation 1 exited with code 7" "$work/rank_node1.$n" ||
      fail "rank_node1: node $n's ddprun did not name rank 2's exit with 7 as the job's end"
  done
  survived rank_node1 3 0 1 2
}

# Every rank of node 0 killed: its ddprun serves the store with no rank of its own until node 1's end.
case_rank_node0() {
  kill_after_step_30 rank_node0 1 0
  finish 0; rc0=$rc; finish 1
  [ $rc0 -eq 0 ] && [ $rc -eq 0 ] || fail "rank_node0: the nodes' ddprun exited with $rc0 and $rc"
  survived rank_node0 2 2 3
}

case_node1_lost() {
  kill_after_step_30 node1_lost 2 3 agent1
  finish 1
  # Node 1's agent started again (the same --node-rank) cannot rejoin a job started without
  # --max-restarts (its ranks admit no joiners): refused.
  GLOO_SOCKET_IFNAME=$DDP_NETNS_IF1 timeout 20 ip netns exec "$DDP_NETNS1" "$ddprun" --in-process-recovery \
    --heartbeat-timeout 2 --nnodes 2 --node-rank 1 --nproc-per-node 2 --master-addr "$DDP_NETNS_ADDR0" \
    --master-port 29500 --no-prefix "$worker" recover "$work/node1_lost" $total $every $step_ms \
    >"$work/node1_again.1" 2>&1
  again=$?
  [ $again -eq 2 ] && grep -q 'rejoins a running in-process-recovery job only with --max-restarts N >= 1' "$work/node1_again.1" ||
    fail "node1_lost: node 1's agent started again was not refused (exit $again)"
  grep -q '^PID rank=' "$work/node1_again.1" && fail "node1_lost: node 1's agent started again started ranks"
  finish 0
  [ $rc -eq 0 ] || fail "node1_lost: node 0's ddprun exited with $rc"
  grep -q "node 1's agent is lost" "$work/node1_lost.0" || fail "node1_lost: node 0's ddprun did not say node 1 was lost"
  verdict_nodes=0
  survived node1_lost 2 0 1
  verdict_nodes="0 1"
}

# A rank stuck outside collectives on node 1 (rank 3 sleeps after its commit of step 30) when
# rank 1 dies: the meeting closes without it after DDP_TIMEOUT (2 s here), and node 1's ddprun
# must kill it at its bound (2 x DDP_TIMEOUT + 10 s) while rank 2, a member, goes on.
case_stuck_left_out() {
  trigger_rank=3
  export DDP_TIMEOUT=2s
  kill_after_step_30 stuck_left_out 1
  finish 0; rc0=$rc; finish 1
  export DDP_TIMEOUT=$timeout
  trigger_rank=
  [ $rc0 -eq 0 ] && [ $rc -eq 0 ] || fail "stuck_left_out: the nodes' ddprun exited with $rc0 and $rc"
  grep -q "rank 3 (pid [0-9]*) still runs though generation 1 left it out" "$work/stuck_left_out.1" ||
    fail "stuck_left_out: node 1's ddprun did not kill the stuck rank the generation left out"
  survived stuck_left_out 2 0 2
}

case_host_lost() {
  kill_after_step_30 host_lost 0 1 agent0
  finish 0
  finish 1
  took=$(( ($(date +%s%N) - kill_ns) / 1000000 ))
  [ $rc -ne 0 ] || fail "host_lost: node 1's ddprun exited 0 without the store's host"
  grep -q "the store's host (node 0, .*) was lost" "$work/host_lost.1" ||
    fail "host_lost: node 1's ddprun did not say the store's host was lost"
  grep -q '^RESULT ok' "$work/host_lost.1" && fail "host_lost: a rank finished without the store's host"
  echo "host_lost: node 1's ddprun exited $rc, $took ms after the kill"
  [ $took -le 10000 ] || fail "host_lost: node 1's ddprun took $took ms to end (bound 10 s: the grace periods)"
}

# Node 1's link goes down (DDP_TIMEOUT=4s): node 0's ranks find ranks 2 and 3 silent through the
# store's keepalive and go on at world 2; node 0's ddprun counts node 1 lost when its heartbeat
# lapses (2 s) and exits 0; node 1's ddprun finds the store's host silent and exits non-zero.
case_link_down() {
  export DDP_TIMEOUT=4s
  trigger_rank=2
  kill_after_step_30 link_down link1
  trigger_rank=
  finish 0; rc0=$rc
  finish 1
  took=$(( ($(date +%s%N) - kill_ns) / 1000000 ))
  ip netns exec "$DDP_NETNS1" ip link set "$DDP_NETNS_IF1" up
  export DDP_TIMEOUT=$timeout
  [ $rc0 -eq 0 ] || fail "link_down: node 0's ddprun exited with $rc0"
  [ $rc -ne 0 ] || fail "link_down: node 1's ddprun exited 0 without the store's host"
  grep -q "the store's host (node 0, .*) was lost" "$work/link_down.1" ||
    fail "link_down: node 1's ddprun did not say the store's host was lost"
  grep -q "node 1's agent is lost" "$work/link_down.0" || fail "link_down: node 0's ddprun did not say node 1 was lost"
  verdict_nodes=0
  survived link_down 2 0 1
  verdict_nodes="0 1"
  echo "link_down: both ddprun ended $took ms after the link went down"
}

# Two losses, one per generation: rank 2 (node 1) after step 30, then job rank 1 (node 0; rank 1
# of generation 1 too) once it paused after world 3's commit of step 60. Generation 2 is job ranks 0 and 3, which each
# agent learns by following every member back through generation 1 (ranks 0, 1, 3): reading
# generation 2's ranks as job ranks would make it 0 and 2, and the job's verdict a failure.
case_twice() {
  more_pauses=1:60:600000:1
  kill_after_step_30 twice 2
  more_pauses=
  i=0
  until grep -q '^PAUSED rank=1 step=60$' "$work/twice.0" 2>/dev/null; do
    i=$((i + 1)); [ $i -le 600 ] || fail "twice: rank 1's pause after step 60 of world 3 not seen within 30 s"
    sleep 0.05
  done
  p=$(pid_of 1)
  last_step=60
  kill_ns=$(date +%s%N)
  kill -9 "$p" || fail "twice: rank 1 had ended before the second kill (a loaded machine: rerun)"
  finish 0; rc0=$rc; finish 1
  [ $rc0 -eq 0 ] && [ $rc -eq 0 ] || fail "twice: the nodes' ddprun exited with $rc0 and $rc"
  [ "$(cat "$work/twice.0" "$work/twice.1" | grep -c 'the job succeeded: every rank of generation 2 (2 ranks)')" -eq 2 ] ||
    fail "twice: both nodes' ddprun must take generation 2's 2 ranks for the job's end"
  gen=2
  survived twice 2 0 3
  gen=1
}

# start_with_rank3_paused NAME: the job NAME started with rank 3 paused after step 10, once it is.
start_with_rank3_paused() {
  export ELASTIC_PAUSE=3:10:600000
  start $1
  unset ELASTIC_PAUSE
  i=0
  until grep -q '^PAUSED rank=3 step=10$' "$work/$1.1" 2>/dev/null; do
    i=$((i + 1)); [ $i -le 600 ] || fail "$1: rank 3's pause not seen within 30 s"
    sleep 0.05
  done
}
# user_stop_job NAME RANKLESS WHO...: while rank 3 pauses after step 10 (RANKLESS=1: once node 0's
# ranks were killed and its ddprun waits for the job's end with none), SIGTERM to each named node's
# ddprun, 0.3 s apart: every rank stops, and both ddprun exit 143 with one verdict naming the first.
user_stop_job() {
  name=$1 rankless=$2; shift 2
  start_with_rank3_paused $name
  taken="the other ranks go on|"
  if [ "$rankless" = 1 ]; then
    taken=
    kill -9 $(pid_of 0) $(pid_of 1) || fail "$name: ranks 0 and 1 had ended before the kill"
    i=0
    until grep -q "this node's ranks have ended; serving the store" "$work/$name.0"; do
      i=$((i + 1)); [ $i -le 600 ] || fail "$name: node 0's ddprun did not wait for the job's end within 30 s"
      sleep 0.05
    done
  fi
  first=$1
  kill_ns=$(date +%s%N)
  for who; do
    [ "$who" = "$first" ] || sleep 0.3
    eval "kill -TERM \$agent$who"
  done
  finish 0; rc0=$rc; finish 1
  took=$(( ($(date +%s%N) - kill_ns) / 1000000 ))
  [ $rc0 -eq 143 ] && [ $rc -eq 143 ] || fail "$name: the nodes' ddprun exited with $rc0 and $rc, not 143"
  for m in 0 1; do
    grep -q "the job failed: node $first's ddprun got signal 15 from the user" "$work/$name.$m" ||
      fail "$name: node $m's ddprun did not name node $first's signal as the job's end"
    ! grep -E "${taken}the store's host .* (was lost|went silent)|a second signal \(" "$work/$name.$m" ||
      fail "$name: node $m's ddprun took the user's signal for a failure, or for a second one"
  done
  one_verdict $name
  grep -q '^RESULT' "$work/$name.0" "$work/$name.1" && fail "$name: a rank finished though the user stopped the job"
  echo "$name: both ddprun exited 143, $took ms after node $first's SIGTERM"
}

# The user's SIGTERM to one node's ddprun: node 1's, then node 0's (the store's host) in a second
# job, in a third once node 0's ranks were killed (it records the stop while waiting for the job's
# end), and in a fourth to each node's ddprun (node 1's first; node 0 rankless, node 1's ranks
# ignore SIGTERM, so node 0 gets its own signal once the stop is recorded and must wait, not exit).
case_user_stop() {
  user_stop_job user_stop1 0 1
  user_stop_job user_stop0 0 0
  user_stop_job user_stop_rankless 1 0
  grep -q "got signal 15: asking every node to stop its ranks" "$work/user_stop_rankless.0" ||
    fail "user_stop_rankless: node 0's ddprun did not ask the nodes to stop from its wait for the job's end"
  printf '#!/bin/sh\ntrap "" TERM\nexec "$@"\n' >"$work/deaf.sh"
  chmod +x "$work/deaf.sh"
  wrap=$work/deaf.sh
  user_stop_job user_stop_each 1 1 0
  wrap=
  grep -q "got signal 15: the job is stopping already (node 1's signal 15)" "$work/user_stop_each.0" ||
    fail "user_stop_each: node 0's ddprun did not wait for the job's end after its own signal"
  user_stop_silent_host user_stop_silent 0 "went silent (.*) once node 1's ddprun had got signal 15"
  user_stop_silent_host user_stop_silent_late 0.5 "did not answer (.*) while this node's ddprun got signal 15"
}

# The store's host silent (node 0's ddprun stopped by SIGSTOP) when node 1's ddprun gets SIGTERM:
# its ddprun exits 143 naming the stop, not 1 for a lost host, within twice the store's bound
# (--heartbeat-timeout 2: a look at the silent store fails after about 4 s). Last: node 0's
# ddprun is killed after. NAME DELAY SAID: the signal DELAY seconds after the stop, and what node
# 1's ddprun must say. At once, the stop is known before the store is asked again (its ranks get
# the signal at once); 0.5 s after, the signal comes inside a look that cannot be answered: the
# look's failure must not be taken for the host's loss (the ranks get the signal when it fails).
user_stop_silent_host() {
  name=$1
  start_with_rank3_paused $name
  kill -STOP "$agent0"
  sleep "$2"
  kill_ns=$(date +%s%N)
  kill -TERM "$agent1"
  finish 1; rc1=$rc
  took=$(( ($(date +%s%N) - kill_ns) / 1000000 ))
  kill -9 "$agent0" $(pid_of 0) $(pid_of 1) 2>/dev/null
  finish 0 # gone, so that the next job can serve its store on the same port
  [ $rc1 -eq 143 ] || fail "$name: node 1's ddprun exited with $rc1, not 143, with node 0 silent"
  grep -q "the store's host (node 0, .*) $3" "$work/$name.1" ||
    fail "$name: node 1's ddprun did not name the user's stop when the store's host went silent"
  [ $took -le 8000 ] || fail "$name: node 1's ddprun took $took ms after its SIGTERM, over twice the store's bound"
  echo "$name: node 1's ddprun exited 143, $took ms after its SIGTERM with node 0 silent"
}

# A joiner on node 1 in the slot of its killed rank 3: admitted at a commit of generation 1.
case_joiner() {
  # Rank 0 held after step 31 of generation 1 until the joiner has registered (an event, not a
  # time), so a commit after it admits it however loaded the machine.
  restarts="--max-restarts 1" more_pauses=0:31:60000:1
  kill_after_step_30 joiner 3
  restarts= more_pauses=
  i=0
  until grep -q 'joiner rank3.1.*registered (job rank 3)' "$work/joiner.1" 2>/dev/null &&
    grep -q '^PAUSED rank=0 step=31$' "$work/joiner.0" 2>/dev/null; do
    i=$((i + 1)); [ $i -le 600 ] || fail "joiner: no registered joiner and held rank 0 within 30 s"
    sleep 0.05
  done
  touch "$work/joiner/resume.0.31"
  finish 0; rc0=$rc; finish 1
  [ $rc0 -eq 0 ] && [ $rc -eq 0 ] || fail "joiner: the nodes' ddprun exited with $rc0 and $rc"
  grep -q '^ddprun: started joiner rank3.1 (pid [0-9]*) in the slot of rank 3' "$work/joiner.1" ||
    fail "joiner: node 1's ddprun started no joiner in rank 3's slot"
  [ "$(cat "$work/joiner.0" "$work/joiner.1" | grep -c '^RECOVERED generation=1 world=3 ')" -eq 3 ] ||
    fail "joiner: ranks 0-2 did not go on at world 3 (generation 1)"
  jpid=$(sed -n 's/^JOINER-PID rank=3 pid=\([0-9]*\) .*/\1/p' "$work/joiner.1")
  got=$(sed -n 's/^JOINED id=rank3.1 generation=2 world=4 rank=3 received_step=\([0-9]*\)$/\1/p' "$work/joiner.1")
  [ -n "$got" ] && [ "$got" -gt 30 ] || fail "joiner: the joiner received step '$got', not a commit after the kill"
  grep -q "^RESULT ok job_rank=3 pid=$jpid generation=2 world=4 " "$work/joiner.1" ||
    fail "joiner: the joiner did not finish ok at generation 2 of world 4"
  [ "$(cat "$work/joiner.0" "$work/joiner.1" | grep -c '^RECOVERED generation=2 world=4 ')" -eq 4 ] ||
    fail "joiner: generation 2 is not the world of 4 with the joiner"
  for r in 0 1 2 3; do
    pid=$(pid_of $r)
    [ $r -eq 3 ] && pid=$jpid
    cat "$work/joiner.0" "$work/joiner.1" | grep -q "^RESULT ok job_rank=$r pid=$pid generation=2 world=4 " ||
      fail "joiner: rank $r did not finish ok in process $pid at generation 2 of world 4"
    d=$("$worker" compare "$work/joiner/params.$r" "$work/ref/params.$r" | sed -n 's/^DIFF //p')
    echo "joiner: rank $r against the uninterrupted run: $d (tolerance $tol)"
    awk -v d="$d" -v t="$tol" 'BEGIN { exit !(d <= t) }' || fail "joiner: rank $r differs from the uninterrupted run by $d"
  done
  one_verdict joiner
  first=$(cat "$work/joiner.0" "$work/joiner.1" | sed -n 's/^RECOVERED generation=1 .*first_step_ns=\([0-9]*\)$/\1/p' | sort -n | head -1)
  full=$(cat "$work/joiner.0" "$work/joiner.1" | sed -n 's/^RECOVERED generation=2 .*first_step_ns=\([0-9]*\)$/\1/p' | sort -n | head -1)
  echo "RECOVERY_MS $(( (first - kill_ns) / 1000000 )) (joiner: the kill to the first step of world 3)"
  echo "RECOVERY_MS $(( (full - kill_ns) / 1000000 )) (joiner: the kill to the first step of world 4 with the joiner)"
  for n in 0 1; do
    grep -q 'the job succeeded: every rank of generation 2 (4 ranks) finished well' "$work/joiner.$n" ||
      fail "joiner: node $n's verdict is not generation 2's 4 ranks"
  done
  echo "joiner: the joiner on node 1 received the commit of step $got"
}

# start_node1_again NAME [FLAGS...]: node 1's ddprun started again, as a scheduler would, with
# the job's command; output in $work/NAME.1, its pid in $agent1.
start_node1_again() {
  again=$1; shift
  GLOO_SOCKET_IFNAME=$DDP_NETNS_IF1 ip netns exec "$DDP_NETNS1" "$ddprun" --in-process-recovery "$@" \
    --heartbeat-timeout 2 --grace-period 1 --nnodes 2 --node-rank 1 --nproc-per-node 2 \
    --master-addr "$DDP_NETNS_ADDR0" --master-port 29500 --no-prefix "$worker" recover "$work/$name" \
    $total $every $step_ms >"$work/$again.1" 2>&1 &
  agent1=$!
  pids="$pids $!"
}

# Node 1 lost whole (its ddprun and both ranks killed after step 30), then its agent started
# again: it waits out the lost agent's heartbeat, starts both ranks as joiners, the survivors
# (ranks 0 and 1, world 2) admit them at a commit and send the state: generation 2 is world 4.
case_node_rejoin() {
  # Rank 0 held after step 31 of generation 1 until both joiners registered (an event, not a
  # time), so a commit after it admits them however loaded the machine.
  restarts="--max-restarts 1" more_pauses=0:31:60000:1
  kill_after_step_30 node_rejoin 2 3 agent1
  more_pauses=
  finish 1
  i=0
  until grep -q '^PAUSED rank=0 step=31$' "$work/node_rejoin.0" 2>/dev/null; do
    i=$((i + 1)); [ $i -le 600 ] || fail "node_rejoin: ranks 0 and 1 did not reach step 31 at world 2 within 30 s"
    sleep 0.05
  done
  rejoin_ns=$(date +%s%N)
  start_node1_again node_rejoin_again --max-restarts 1
  restarts=
  i=0
  until grep -q 'joiner rank2.1.*registered (job rank 2)' "$work/node_rejoin_again.1" 2>/dev/null &&
    grep -q 'joiner rank3.1.*registered (job rank 3)' "$work/node_rejoin_again.1" 2>/dev/null; do
    i=$((i + 1)); [ $i -le 600 ] || fail "node_rejoin: node 1's agent started again registered no joiners within 30 s"
    sleep 0.05
  done
  touch "$work/node_rejoin/resume.0.31"
  finish 0; rc0=$rc; finish 1
  [ $rc0 -eq 0 ] && [ $rc -eq 0 ] || fail "node_rejoin: node 0's ddprun exited with $rc0, node 1's started again with $rc"
  grep -q "^ddprun: node 1: node 1's agent is lost (its heartbeat stood still for 2 s, and none of its ranks is a member): rejoining the running job" \
    "$work/node_rejoin_again.1" || fail "node_rejoin: node 1's agent started again did not say it rejoins"
  [ "$(grep -c '^RECOVERED generation=1 world=2 ' "$work/node_rejoin.0")" -eq 2 ] ||
    fail "node_rejoin: ranks 0 and 1 did not go on at world 2 (generation 1)"
  for r in 2 3; do
    got=$(sed -n "s/^JOINED id=rank$r.1 generation=2 world=4 rank=$r received_step=\([0-9]*\)\$/\1/p" "$work/node_rejoin_again.1")
    [ -n "$got" ] && [ "$got" -gt 30 ] || fail "node_rejoin: joiner rank$r.1 received step '$got', not a commit after the kill"
    jpid=$(sed -n "s/^JOINER-PID rank=$r pid=\([0-9]*\) .*/\1/p" "$work/node_rejoin_again.1")
    grep -q "^RESULT ok job_rank=$r pid=$jpid generation=2 world=4 " "$work/node_rejoin_again.1" ||
      fail "node_rejoin: joiner rank$r.1 did not finish ok at generation 2 of world 4"
  done
  for r in 0 1; do
    pid=$(sed -n "s/^PID rank=$r pid=\([0-9]*\)\$/\1/p" "$work/node_rejoin.0")
    grep -q "^RESULT ok job_rank=$r pid=$pid generation=2 world=4 " "$work/node_rejoin.0" ||
      fail "node_rejoin: rank $r did not finish ok in its own process ($pid) at generation 2 of world 4"
  done
  [ "$(cat "$work/node_rejoin.0" "$work/node_rejoin_again.1" | grep -c '^RECOVERED generation=2 world=4 ')" -eq 4 ] ||
    fail "node_rejoin: generation 2 is not the world of 4 with node 1's joiners"
  for r in 0 1 2 3; do
    d=$("$worker" compare "$work/node_rejoin/params.$r" "$work/ref/params.$r" | sed -n 's/^DIFF //p')
    echo "node_rejoin: rank $r against the uninterrupted run: $d (tolerance $tol)"
    awk -v d="$d" -v t="$tol" 'BEGIN { exit !(d <= t) }' || fail "node_rejoin: rank $r differs from the uninterrupted run by $d"
  done
  for f in node_rejoin.0 node_rejoin_again.1; do
    [ "$(grep -c 'the job succeeded: every rank of generation 2 (4 ranks) finished well' "$work/$f")" -eq 1 ] ||
      fail "node_rejoin: $f has not the one verdict of generation 2's 4 ranks"
  done
  full=$(cat "$work/node_rejoin.0" "$work/node_rejoin_again.1" | sed -n 's/^RECOVERED generation=2 .*first_step_ns=\([0-9]*\)$/\1/p' | sort -n | head -1)
  echo "REJOIN_MS $(( (full - rejoin_ns) / 1000000 )) (node_rejoin: node 1's agent started again to the first step of world 4)"
}

# The rejoined node lost again: node 1's agent started again, its joiners in generation 2 (world
# 4), then that agent and its joiners killed after step 60: ranks 0 and 1 go on at world 2
# (generation 3), and a third agent for node 1 is refused, --max-restarts 1 spent on the rejoin.
case_rejoined_lost() {
  restarts="--max-restarts 1" more_pauses=0:31:60000:1,0:61:60000:3
  kill_after_step_30 rejoined_lost 2 3 agent1
  more_pauses=
  finish 1
  i=0
  until grep -q '^PAUSED rank=0 step=31$' "$work/rejoined_lost.0" 2>/dev/null; do
    i=$((i + 1)); [ $i -le 600 ] || fail "rejoined_lost: ranks 0 and 1 did not reach step 31 at world 2 within 30 s"
    sleep 0.05
  done
  export ELASTIC_PAUSE=2:60:60000:2
  start_node1_again rejoined_lost_again --max-restarts 1
  unset ELASTIC_PAUSE
  restarts=
  i=0
  until grep -q 'joiner rank2.1.*registered (job rank 2)' "$work/rejoined_lost_again.1" 2>/dev/null &&
    grep -q 'joiner rank3.1.*registered (job rank 3)' "$work/rejoined_lost_again.1" 2>/dev/null; do
    i=$((i + 1)); [ $i -le 600 ] || fail "rejoined_lost: node 1's agent started again registered no joiners within 30 s"
    sleep 0.05
  done
  touch "$work/rejoined_lost/resume.0.31"
  i=0
  until grep -q '^PAUSED rank=2 step=60$' "$work/rejoined_lost_again.1" 2>/dev/null; do
    i=$((i + 1)); [ $i -le 600 ] || fail "rejoined_lost: joiner rank2.1 did not reach step 60 at world 4 within 30 s"
    sleep 0.05
  done
  j2=$(sed -n 's/^JOINER-PID rank=2 pid=\([0-9]*\) .*/\1/p' "$work/rejoined_lost_again.1")
  j3=$(sed -n 's/^JOINER-PID rank=3 pid=\([0-9]*\) .*/\1/p' "$work/rejoined_lost_again.1")
  kill_ns=$(date +%s%N)
  kill -9 "$agent1" $j2 $j3 || fail "rejoined_lost: node 1's rejoined agent or a joiner had ended before the kill"
  last_step=60
  finish 1
  i=0
  until grep -q '^PAUSED rank=0 step=61$' "$work/rejoined_lost.0" 2>/dev/null; do
    i=$((i + 1)); [ $i -le 600 ] || fail "rejoined_lost: ranks 0 and 1 did not reach step 61 at world 2 within 30 s"
    sleep 0.05
  done
  GLOO_SOCKET_IFNAME=$DDP_NETNS_IF1 timeout 20 ip netns exec "$DDP_NETNS1" "$ddprun" --in-process-recovery \
    --max-restarts 1 --heartbeat-timeout 2 --nnodes 2 --node-rank 1 --nproc-per-node 2 \
    --master-addr "$DDP_NETNS_ADDR0" --master-port 29500 --no-prefix "$worker" recover "$work/$name" \
    $total $every $step_ms >"$work/third_again.1" 2>&1
  again=$?
  touch "$work/rejoined_lost/resume.0.61"
  [ $again -eq 2 ] && grep -q 'the node has rejoined 1 time already, --max-restarts 1; the others go on without it; starting no rank' "$work/third_again.1" ||
    fail "rejoined_lost: a third agent for node 1 was not refused for --max-restarts 1 (exit $again)"
  ! grep -q 'PID rank=' "$work/third_again.1" || fail "rejoined_lost: the refused third agent started ranks"
  finish 0
  [ $rc -eq 0 ] || fail "rejoined_lost: node 0's ddprun exited with $rc"
  [ "$(cat "$work/rejoined_lost.0" "$work/rejoined_lost_again.1" | grep -c '^RECOVERED generation=2 world=4 ')" -eq 4 ] ||
    fail "rejoined_lost: generation 2 is not the world of 4 with node 1's joiners"
  gen=3
  verdict_nodes=0
  survived rejoined_lost 2 0 1
  gen=1 verdict_nodes="0 1"
  grep -q 'the job succeeded: every rank of generation 3 (2 ranks) finished well' "$work/rejoined_lost.0" ||
    fail "rejoined_lost: node 0's verdict is not generation 3's 2 ranks"
}

# agent1_alive_refused: node 1's agent started again while the first one lives is refused (2).
agent1_alive_refused() {
  GLOO_SOCKET_IFNAME=$DDP_NETNS_IF1 timeout 20 ip netns exec "$DDP_NETNS1" "$ddprun" --in-process-recovery \
    --max-restarts 1 --heartbeat-timeout 2 --nnodes 2 --node-rank 1 --nproc-per-node 2 \
    --master-addr "$DDP_NETNS_ADDR0" --master-port 29500 --no-prefix "$worker" recover "$work/$name" \
    $total $every $step_ms >"$work/alive_again.1" 2>&1
  again=$?
  [ $again -eq 2 ] && grep -q "node 1's agent is alive (its heartbeat moved): --node-rank 1 is taken" \
    "$work/alive_again.1" || fail "rejoin_ended: node 1's agent started again beside a live one was not refused (exit $again)"
  ! grep -q 'PID rank=' "$work/alive_again.1" || fail "rejoin_ended: node 1's agent refused beside a live one started ranks"
}

# Node 1's agent started again beside the live one: refused (2); node 1 then lost whole, ranks
# 0 and 1 finish at world 2, rank 0 held after its loop (the job's end is in the store, node 0
# still serves it): node 1's agent started again exits 3, starting nothing.
case_rejoin_ended() {
  restarts="--max-restarts 1" before_kill=agent1_alive_refused
  export ELASTIC_HOLD_END=0
  kill_after_step_30 rejoin_ended 2 3 agent1
  unset ELASTIC_HOLD_END
  restarts= before_kill=
  finish 1
  i=0
  until grep -q '^HELD-END rank=0$' "$work/rejoin_ended.0" 2>/dev/null; do
    i=$((i + 1)); [ $i -le 600 ] || fail "rejoin_ended: rank 0 did not end its loop within 30 s"
    sleep 0.05
  done
  GLOO_SOCKET_IFNAME=$DDP_NETNS_IF1 timeout 20 ip netns exec "$DDP_NETNS1" "$ddprun" --in-process-recovery \
    --max-restarts 1 --heartbeat-timeout 2 --nnodes 2 --node-rank 1 --nproc-per-node 2 \
    --master-addr "$DDP_NETNS_ADDR0" --master-port 29500 --no-prefix "$worker" recover "$work/$name" \
    $total $every $step_ms >"$work/ended_again.1" 2>&1
  again=$?
  touch "$work/rejoin_ended/resume.end.0"
  [ $again -eq 3 ] && grep -q 'the job this agent would rejoin has ended' "$work/ended_again.1" ||
    fail "rejoin_ended: node 1's agent started after the job's end exited $again, not 3 with its message"
  ! grep -q 'PID rank=' "$work/ended_again.1" || fail "rejoin_ended: node 1's agent started after the job's end started ranks"
  finish 0
  [ $rc -eq 0 ] || fail "rejoin_ended: node 0's ddprun exited with $rc"
  verdict_nodes=0
  survived rejoin_ended 2 0 1
  verdict_nodes="0 1"
}

for c in ${cases:-rank_node1 rank_node0 node1_lost stuck_left_out host_lost}; do
  "case_$c"
done
pids=""
echo "PASSED"
