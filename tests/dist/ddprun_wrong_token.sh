#!/bin/sh
# dist.ddprun.wrong_token: rank 1 starts with another DDP_TOKEN; the store refuses it, and rank 0,
# waiting for it in the rendezvous, fails within seconds naming rank 1 and the token, not at
# DDP_TIMEOUT with "a rank did not arrive".
#   ddprun_wrong_token.sh DDPRUN SCENARIO_WORKER
set -u
ddprun=$1; worker=$2
start=$(date +%s)
out=$(DDP_TIMEOUT=60s "$ddprun" --nproc-per-node 2 sh -c \
  'if [ "$RANK" = 1 ]; then DDP_TOKEN=not-the-jobs-token; export DDP_TOKEN; fi; exec "$0" "$@"' "$worker" ok 2>&1)
took=$(($(date +%s) - start))
echo "$out"
fail() { echo "FAILED: $*"; exit 1; }
echo "$out" | grep -q "^\[1\] RESULT kind=config" || fail "rank 1 was not refused for its token"
echo "$out" | grep -q "^\[0\] RESULT kind=peer_lost rank=1 " || fail "rank 0 did not fail naming rank 1"
echo "$out" | grep -q "^\[0\] MESSAGE .*rank 1 was refused by the rendezvous store: its connection (from .*) could not prove it knows the job token" ||
  fail "rank 0 did not say that rank 1 was refused for its token"
[ "$took" -le 20 ] || fail "it took $took s (DDP_TIMEOUT is 60 s)"
echo "ok ($took s)"
