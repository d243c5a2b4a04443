#!/bin/sh
# dist.elastic.join_nodes: joiners across two agents on loopback (--nnodes 2 --nproc-per-node 1
# --in-process-recovery --max-restarts 1; node 0 serves the store), where each node's verdict is
# the whole job's.
#   member_exit: rank 1 finishes its loop, then exits 7 (ELASTIC_EXIT): it was a member of the
#                last generation, so both agents exit 7; no joiner stands in for it (the job had
#                ended), and the run without --max-restarts says the same.
#   stopped_joiner: node 1's only rank is killed after step 30; its joiner registers and is
#                stopped (SIGSTOP) before rank 0, held after step 31, may admit it; rank 0
#                admits it at the next commit, meets without it (last call 1 s) and finishes.
#                Node 1's agent, whose ranks never finished well, learns the job's end from the
#                store and kills the joiner: both agents exit 0 well within the bound.
#   joined_left_out: as stopped_joiner, but the joiner joins generation 2, then is held after
#                its step 45 and stopped there: node 1's agent, with no rank left running, stops
#                it at once (it is a member: the node cannot recover), rank 0's collective fails,
#                generation 3 forms without it, and both agents exit 0 on generation 3's verdict.
#   elastic_join_nodes.sh DDPRUN ELASTIC_RECOVERY_WORKER
set -u
ddprun=$1; worker=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/ddp-elastic-join-nodes.XXXXXX")
p0= p1= jp=
trap 'for p in $p0 $p1 $jp; do kill -9 "$p" 2>/dev/null; done; rm -rf "$dir"' EXIT
export DDP_TOKEN=join-nodes-token DDP_TIMEOUT=20s
total=60 every=10 step_ms=10
fail() { echo "FAILED: $*"; for f in "$dir"/*.log; do echo "== $f"; cat "$f"; done; exit 1; }
free_port() { python3 "$(dirname "$0")/../support/free_port.py"; }

# start NAME [FLAGS...]: both agents of the job, in the background.
start() {
  name=$1; shift
  port=$(free_port)
  mkdir -p "$dir/$name"
  for n in 0 1; do
    # Each agent leads a process group of its own under this shell: a group whose every parent is
    # inside it (ctest may start the test in a session of its own) is orphaned, and the kernel
    # hangs up (SIGHUP) a stopped joiner in it when some other member exits, before its agent can.
    python3 -c 'import os, sys; os.setpgid(0, 0); os.execvp(sys.argv[1], sys.argv[1:])' \
      "$ddprun" --in-process-recovery "$@" --heartbeat-timeout 2 --grace-period 1 --nnodes 2 --node-rank $n \
      --nproc-per-node 1 --master-addr 127.0.0.1 --master-port "$port" --no-prefix \
      "$worker" recover "$dir/$name" $total $every $step_ms >"$dir/$name.node$n.log" 2>&1 &
    eval p$n=\$!
  done
}
# finish NAME SECONDS: waits for both agents (at most SECONDS) and sets rc0 and rc1.
finish() {
  i=0
  while kill -0 "$p0" 2>/dev/null || kill -0 "$p1" 2>/dev/null; do
    i=$((i + 1)); [ $i -le $(($2 * 10)) ] || fail "$1: the agents did not end within $2 s"
    sleep 0.1
  done
  wait "$p0"; rc0=$?
  wait "$p1"; rc1=$?
  p0= p1=
}

# member_exit, without and with joiners: the verdict is rank 1's exit 7 either way.
for flags in "" "--max-restarts 1"; do
  name=member_exit${flags:+_joiners}
  export ELASTIC_EXIT=1:7
  start "$name" $flags
  unset ELASTIC_EXIT
  finish "$name" 60
  [ $rc0 -eq 7 ] && [ $rc1 -eq 7 ] || fail "$name: the agents exited with $rc0 and $rc1, not 7 (rank 1's exit)"
  grep -q 'the job failed: rank 1 of generation 0 exited with code 7' "$dir/$name.node0.log" ||
    fail "$name: node 0's verdict does not name rank 1's exit 7"
  grep -q 'started joiner' "$dir/$name.node1.log" && fail "$name: a joiner was started after the job had ended"
  echo "$name: both agents exited 7, the verdict names rank 1's exit"
done

# stopped_joiner: every step is an event seen in a log (the pauses end on resume files).
export ELASTIC_PAUSE=1:30:600000,0:31:60000:1 ELASTIC_LAST_CALL_MS=1000
start stopped_joiner --max-restarts 1
unset ELASTIC_PAUSE ELASTIC_LAST_CALL_MS
wait_for() { # LOG PATTERN SECONDS
  i=0
  until grep -q "$2" "$dir/$1.log" 2>/dev/null; do
    i=$((i + 1)); [ $i -le $(($3 * 20)) ] || fail "$1: '$2' not seen within $3 s"
    sleep 0.05
  done
}
wait_for stopped_joiner.node1 '^PAUSED rank=1 step=30$' 30
kill -9 "$(sed -n 's/^PID rank=1 pid=\([0-9]*\)$/\1/p' "$dir/stopped_joiner.node1.log")" ||
  fail "stopped_joiner: rank 1 had ended before the kill"
wait_for stopped_joiner.node1 'joiner rank1.1.*registered (job rank 1)' 20
wait_for stopped_joiner.node0 '^PAUSED rank=0 step=31$' 30
jp=$(sed -n 's/^JOINER-PID rank=1 pid=\([0-9]*\) .*/\1/p' "$dir/stopped_joiner.node1.log")
kill -STOP "$jp" || fail "stopped_joiner: the joiner had ended before SIGSTOP"
touch "$dir/stopped_joiner/resume.0.31"
finish stopped_joiner 60
[ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] || fail "stopped_joiner: the agents exited with $rc0 and $rc1, not 0"
grep -q 'admitted joiner(s) rank1.1' "$dir/stopped_joiner.node0.log" || fail "stopped_joiner: rank 0 did not admit the joiner"
grep -q 'joiner rank1.1 (pid [0-9]*) is still waiting .* killing it' "$dir/stopped_joiner.node1.log" ||
  fail "stopped_joiner: node 1's agent did not end the stopped joiner"
echo "stopped_joiner: admitted, left out, killed by node 1's agent once the job had ended; both agents exited 0"

# joined_left_out: the joiner (job rank 1) holds after its step 45 in generation 2, then is stopped.
export ELASTIC_PAUSE=1:30:600000,0:31:60000:1,1:45:600000:2 ELASTIC_LAST_CALL_MS=1000 DDP_TIMEOUT=3s
start joined_left_out --max-restarts 1
unset ELASTIC_PAUSE ELASTIC_LAST_CALL_MS
export DDP_TIMEOUT=20s
wait_for joined_left_out.node1 '^PAUSED rank=1 step=30$' 30
kill -9 "$(sed -n 's/^PID rank=1 pid=\([0-9]*\)$/\1/p' "$dir/joined_left_out.node1.log")" ||
  fail "joined_left_out: rank 1 had ended before the kill"
wait_for joined_left_out.node1 'joiner rank1.1.*registered (job rank 1)' 20
wait_for joined_left_out.node0 '^PAUSED rank=0 step=31$' 30
touch "$dir/joined_left_out/resume.0.31"
wait_for joined_left_out.node1 '^JOINED id=rank1.1 generation=2 ' 30
wait_for joined_left_out.node1 '^PAUSED rank=1 step=45$' 30
jp=$(sed -n 's/^JOINER-PID rank=1 pid=\([0-9]*\) .*/\1/p' "$dir/joined_left_out.node1.log")
kill -STOP "$jp" || fail "joined_left_out: the joiner had ended before SIGSTOP"
finish joined_left_out 60
[ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] || fail "joined_left_out: the agents exited with $rc0 and $rc1, not 0"
grep -q '^RESULT ok job_rank=0 .*generation=3 world=1 ' "$dir/joined_left_out.node0.log" ||
  fail "joined_left_out: rank 0 did not finish alone in generation 3"
grep -q "joiner rank1.1 of rank 1 (pid $jp) was killed by signal \(15\|9\) " "$dir/joined_left_out.node1.log" ||
  fail "joined_left_out: node 1's agent did not end the joined, stopped joiner"
grep -q 'the job succeeded: every rank of generation 3 (1 rank) finished well' "$dir/joined_left_out.node1.log" ||
  fail "joined_left_out: node 1's verdict is not generation 3's"
echo "joined_left_out: joined generation 2, stopped, ended by node 1's agent; generation 3 finished, both agents exited 0"
echo "PASSED"
