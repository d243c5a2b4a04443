#!/bin/sh
# tests/netns/netns.sh removes its namespaces and links on every exit path: CMD exits
# non-zero, the wrapper gets SIGTERM mid-run, and (swept by the next run) SIGKILL.
# The ctest dist.netns.harness. usage: harness_test.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
netns=$here/netns.sh
work=$(mktemp -d "${TMPDIR:-/tmp}/ddp-netnsh.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
if [ "$(id -u)" != 0 ]; then echo "SKIP: not root (network namespaces need CAP_SYS_ADMIN)"; exit 77; fi
command -v ip >/dev/null || { echo "SKIP: ip (iproute2) is missing"; exit 77; }
record='echo "$DDP_NETNS0 $DDP_NETNS1 $DDP_NETNS_IF0 $DDP_NETNS_IF1" > '
gone() { # gone FILE: none of the recorded namespaces or links exists
  read -r n0 n1 i0 i1 < "$1" || fail "no record in $1"
  for ns in $n0 $n1; do ip netns list | grep -q "^$ns\( \|\$\)" && return 1; done
  for l in $i0 $i1; do ip link show "$l" >/dev/null 2>&1 && return 1; done
  return 0
}
wait_record() { i=0; until [ -s "$1" ]; do i=$((i + 1)); [ $i -lt 100 ] || fail "no record in $1"; sleep 0.1; done; }

# 1. CMD fails: its code comes back, the nodes go.
sh "$netns" -- sh -c "$record $work/a; exit 3"
rc=$?
[ $rc -eq 3 ] || fail "exit code $rc, expected CMD's 3"
gone "$work/a" || fail "namespaces or links left after CMD failed: $(cat "$work/a")"

# 2. SIGTERM mid-run: CMD is stopped, the nodes go.
sh "$netns" -- sh -c "$record $work/b; exec sleep 60" &
w=$!
wait_record "$work/b"
read -r n0 n1 i0 i1 < "$work/b"
ip netns list | grep -q "^$n0" || fail "node 0 missing while running"
kill -TERM $w
wait $w
rc=$?
[ $rc -eq 143 ] || fail "exit code $rc after SIGTERM, expected 143"
gone "$work/b" || fail "namespaces or links left after SIGTERM: $(cat "$work/b")"

# 3. SIGKILL: no trap runs; the next run removes what the dead run left.
sh "$netns" -- sh -c "$record $work/c; exec sleep 60" &
w=$!
wait_record "$work/c"
child=$(ps -o pid= --ppid $w | tr -d ' ')
kill -KILL $w
wait $w 2>/dev/null
[ -n "$child" ] && kill $child 2>/dev/null
gone "$work/c" && fail "SIGKILL left nothing behind: this case tests nothing"
sh "$netns" -- true || fail "a run after a SIGKILLed one failed"
gone "$work/c" || fail "the next run did not remove what a SIGKILLed run left: $(cat "$work/c")"
echo "ok: namespaces and links removed on exit, failure, SIGTERM and (by the next run) SIGKILL"
