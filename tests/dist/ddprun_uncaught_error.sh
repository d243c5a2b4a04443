#!/bin/sh
# dist.ddprun.uncaught_error: a ddp::error that escapes main ends its rank as an error, not a crash:
# its message on one line of stderr, exit status 70 (ddp::uncaught_error_exit_code), no
# "terminate called" nor SIGABRT; ddprun's summary quotes the message of the rank that threw first.
#   ddprun_uncaught_error.sh DDPRUN SCENARIO_WORKER
set -u
ddprun=$1; worker=$2
out=$(DDP_TIMEOUT=30s "$ddprun" --nproc-per-node 2 "$worker" uncaught 2>&1)
rc=$?
echo "$out"
fail() { echo "FAILED: $*"; exit 1; }
echo "$out" | grep -q "terminate called" && fail "the C++ runtime's terminate message was printed"
echo "$out" | grep -q "SIGABRT" && fail "a rank was reported killed by SIGABRT"
echo "$out" | grep -q '^\[1\] ddp: rank 1: ddp data error: batch 7 is corrupt (the test.s own error) (an uncaught ddp::error: the rank exits with code 70)$' ||
  fail "rank 1 did not print its error on one line"
echo "$out" | grep -q "ddprun: the first rank to fail was rank 1: it failed: batch 7 is corrupt (the test.s own error) (ddprun exits with 70)" ||
  fail "ddprun's summary does not quote rank 1's message"
[ "$rc" = 70 ] || fail "ddprun exited $rc, not 70"
echo ok
