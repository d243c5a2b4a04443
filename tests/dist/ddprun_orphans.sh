#!/bin/sh
# dist.ddprun.orphans: ranks die with their launcher. ddprun is killed with SIGKILL while rank 1
# sleeps in user code and rank 0 waits for it in an all_reduce:
#   - started by ddprun itself, both ranks end within seconds (the parent-death signal, SIGTERM);
#   - started through a shell that forks (no parent-death signal reaches the program), rank 0
#     still ends at once, naming the store ddprun served, not at DDP_TIMEOUT.
#   ddprun_orphans.sh DDPRUN SCENARIO_WORKER
set -u
ddprun=$1; worker=$2
base=${TMPDIR:-/tmp}
case $base in /*) ;; *) base=/tmp ;; esac
d=$(mktemp -d "$base/ddprun-orphans.XXXXXX")
pids=""
cleanup() {
  for p in $pids; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$d"
}
trap cleanup EXIT
out=/dev/null
fail() { echo "FAILED: $*"; cat "$out"; exit 1; }

# Whether process $1 has ended (gone, or a zombie nobody reaped yet).
ended() {
  [ -e "/proc/$1/stat" ] || return 0
  state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
  [ -z "$state" ] || [ "$state" = Z ] || [ "$state" = X ]
}

# Starts the job (its command line: "$@"), waits for both ranks' READY, kills ddprun with SIGKILL.
# Each job has an output file of its own: the background job's redirection may come late.
job=0
start_and_kill_launcher() {
  job=$((job + 1))
  out="$d/out.$job"
  DDP_TIMEOUT=60s DDP_TEST_SLEEP_SECONDS=120 "$ddprun" --nproc-per-node 2 --no-prefix "$@" >"$out" 2>&1 &
  launcher=$!
  i=0
  while [ "$(grep -c '^READY rank=[01] pid=[0-9]*$' "$out" 2>/dev/null)" != 2 ]; do
    i=$((i + 1))
    [ $i -le 600 ] || fail "the ranks did not start within 60 s"
    sleep 0.1
  done
  pids=$(sed -n 's/^READY rank=[0-9]* pid=\([0-9]*\)$/\1/p' "$out" | tr '\n' ' ')
  rank0=$(sed -n 's/^READY rank=0 pid=\([0-9]*\)$/\1/p' "$out")
  sleep 0.5 # rank 0 inside its all_reduce
  kill -9 "$launcher"
  wait "$launcher" 2>/dev/null
}

# Waits up to $2 tenths of a second for every pid in $1 to end.
all_end_within() {
  i=0
  while :; do
    left=""
    for p in $1; do ended "$p" || left="$left $p"; done
    [ -z "$left" ] && return 0
    i=$((i + 1))
    [ $i -le "$2" ] || return 1
    sleep 0.1
  done
}

start_and_kill_launcher "$worker" orphan
all_end_within "$pids" 50 || fail "ranks (pids $pids) still run 5 s after ddprun was killed"
echo "direct ranks: ended within 5 s of ddprun's SIGKILL"

# A forking shell in between: the program is ddprun's grandchild.
start_and_kill_launcher sh -c '"$0" "$@"; exit $?' "$worker" orphan
all_end_within "$rank0" 50 || fail "rank 0 (pid $rank0) still waits 5 s after ddprun was killed"
grep -q "which ddprun serves on the master node, closed its connection: the launcher is gone" "$out" ||
  fail "rank 0 did not say that the launcher is gone"
echo "rank 0 behind a shell: ended within 5 s, saying the launcher is gone"
echo ok
