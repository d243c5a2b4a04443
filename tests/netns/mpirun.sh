#!/bin/sh
# mpirun across the two namespaced nodes of tests/netns/netns.sh: mpirun runs on node 0 and
# starts node 1's daemon through tests/netns/mpirun_agent.sh (`ip netns exec`, where a
# cluster has ssh); 2 ranks per node, ddp's rendezvous on node 0's address. The ctest
# launcher.mpirun.netns:
#   tests/netns/netns.sh -- sh tests/netns/mpirun.sh WORKER        (WORKER: scenario_worker)
set -u
worker=$1
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*"; exit 1; }
command -v mpirun >/dev/null || { echo "SKIP: mpirun is missing (apt-get install openmpi-bin)"; exit 77; }
[ -n "${DDP_NETNS0:-}" ] || fail "run me inside tests/netns/netns.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/ddp-mpinetns.XXXXXX")
trap 'rm -rf "$work"' EXIT
# A signal (ctest's timeout, ^C, scripts/test stopping its waiting tests) runs the EXIT trap too.
trap 'exit 143' TERM HUP
trap 'exit 130' INT
subnet=${DDP_NETNS_ADDR0%.1}.0/24
DDP_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n'); export DDP_TOKEN
export DDP_TIMEOUT=30s OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Each rank says which namespace (node) it runs in, then becomes the worker.
timeout -k 5 90 ip netns exec "$DDP_NETNS0" mpirun --mca plm_rsh_agent "$here/mpirun_agent.sh" \
  --mca plm_rsh_no_tree_spawn 1 --mca oob_tcp_if_include "$subnet" \
  -H "$DDP_NETNS_ADDR0:2,$DDP_NETNS_ADDR1:2" -np 4 -x DDP_TOKEN -x DDP_TIMEOUT \
  -x MASTER_ADDR="$DDP_NETNS_ADDR0" -x MASTER_PORT=29500 \
  sh -c 'echo "NODE rank=$OMPI_COMM_WORLD_RANK ns=$(ip netns identify $$)"; exec "$0" ok' "$worker" > "$work/out" 2>&1
rc=$?
cat "$work/out"
[ $rc -eq 0 ] || fail "mpirun across the two nodes exited with $rc"
[ "$(grep -c 'RESULT ok rank=[0-3] size=4' "$work/out")" -eq 4 ] || fail "expected 4 ranks of one 4-rank group"
for r in 0 1; do grep -q "NODE rank=$r ns=$DDP_NETNS0\$" "$work/out" || fail "rank $r did not run on node 0"; done
for r in 2 3; do grep -q "NODE rank=$r ns=$DDP_NETNS1\$" "$work/out" || fail "rank $r did not run on node 1"; done
echo "ok: mpirun across two nodes"
