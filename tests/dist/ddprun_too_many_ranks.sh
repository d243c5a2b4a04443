#!/bin/sh
# dist.ddprun.too_many_ranks: a job whose ranks need more local ports than the node's ephemeral
# range holds (--nproc-per-node 1000: 499500 at least, against 28232 by default) is refused up
# front, naming the ports, the range and how many ranks fit, before any rank starts.
#   ddprun_too_many_ranks.sh DDPRUN
set -u
ddprun=$1
range=$(awk '{print $2 - $1 + 1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null) ||
  { echo "SKIPPED: no /proc/sys/net/ipv4/ip_local_port_range"; exit 77; }
[ -n "$range" ] && [ "$range" -lt 499500 ] || { echo "SKIPPED: the port range holds $range ports"; exit 77; }
base=${TMPDIR:-/tmp}
case $base in /*) ;; *) base=/tmp ;; esac
d=$(mktemp -d "$base/ddprun-too-many.XXXXXX")
trap 'rm -rf "$d"' EXIT
start=$(date +%s)
out=$("$ddprun" --nproc-per-node 1000 sh -c 'touch "$0/started.$RANK"' "$d" 2>&1)
rc=$?
took=$(($(date +%s) - start))
echo "$out"
fail() { echo "FAILED: $*"; exit 1; }
[ "$rc" = 2 ] || fail "ddprun exited $rc, not 2"
ls "$d" | grep -q started && fail "ranks were started"
echo "$out" | grep -q "a job of 1000 ranks, 1000 on this node, needs 999000 local TCP ports" ||
  fail "the message does not name the ports the job needs"
echo "$out" | grep -q "holds $range: start at most [0-9]* ranks per node" || fail "the message does not say what fits"
[ "$took" -le 5 ] || fail "it took $took s"
echo ok
