#!/bin/sh
# dist.ddprun.first_to_die: a rank fails on the loss of a peer whose main thread has exited
# while its other threads still run (a killed rank's pid reads as a zombie before ddprun can
# reap it); ddprun reaps the failed rank first but names the one that died first, with its code.
#   ddprun_first_to_die.sh DDPRUN ZOMBIE_LEADER
set -u
ddprun=$1; program=$2
d=$(mktemp -d "${TMPDIR:-/tmp}/ddprun-first-to-die.XXXXXX")
trap 'rm -rf "$d"' EXIT
out=$(ZOMBIE_LEADER_PID_FILE="$d/pid" "$ddprun" --nproc-per-node 2 --grace-period 10 "$program" 2>&1)
rc=$?
echo "$out"
echo "$out" | grep -q "failing on its loss" || { echo "FAILED: rank 0 never saw rank 1's main thread exit"; exit 1; }
echo "$out" | grep -q "the first rank to fail was rank 1: it was killed by signal 9" ||
  { echo "FAILED: ddprun did not name rank 1, killed by signal 9, first"; exit 1; }
[ "$rc" = 137 ] || { echo "FAILED: ddprun exited $rc, not 137 (rank 1's SIGKILL)"; exit 1; }
echo ok
