#!/bin/sh
# dist.checkpoint.resize: a job of 2 ranks trains S1 steps and saves; jobs of 1 and 3 ranks
# load that checkpoint and train S2 more. Every job's parameters must equal single-process
# training on the whole global batch (checkpoint_worker.cpp), so a resumed run at another
# world size follows the uninterrupted trajectory. Then one epoch of 50 samples is visited by
# jobs of 2, 3 and 1 ranks in turn, each resuming at the position the last one saved: every
# sample index must be visited exactly once across the jobs.
#   checkpoint_resize.sh DDPRUN CHECKPOINT_WORKER
set -u
ddprun=$1; worker=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/ddp-ckpt.XXXXXX")
trap 'rm -rf "$dir"' EXIT
export DDP_TIMEOUT=60s
fail() { echo "FAILED: $*"; exit 1; }
run() { # run WORLD ARGS...: the job's output; every rank must report ok
  world=$1; shift
  out=$("$ddprun" --nproc-per-node "$world" "$worker" "$@" 2>&1); rc=$?
  echo "$out"
  [ $rc -eq 0 ] || fail "the job of $world ranks ($*) exited with $rc"
  [ "$(echo "$out" | grep -c "RESULT ok phase=$1 .*size=$world ")" -eq "$world" ] ||
    fail "not every rank of $world reported ok ($*)"
}
run 2 save "$dir" 8
[ -s "$dir/sharded.ckpt" ] && [ -s "$dir/ddp.ckpt" ] || fail "no checkpoint written"
run 1 resume "$dir" 8 6
run 3 resume "$dir" 8 6

run 2 visit first "$dir" a 5   # 2 ranks x 5 batches of 2: positions 0-19
run 3 visit next "$dir" b 2    # 3 ranks x 2 batches of 2: 20-31
run 1 visit last "$dir" c      # the rest: 32-49
seen=$(cat "$dir"/visited.* | sort -n)
[ "$(echo "$seen" | wc -l)" -eq 50 ] || fail "$(echo "$seen" | wc -l) visits of an epoch of 50"
[ "$seen" = "$(seq 0 49)" ] || fail "the epoch's indices were not visited exactly once: $(echo "$seen" | uniq -d | tr '\n' ' ')"
echo "ok"
