#!/bin/sh
# Checks of the flagship example with real processes and the real data.
# usage: fashion_mnist.sh CASE EXAMPLE_BINARY DDPRUN
#   accuracy | same_global_batches | resume | restart | errors | local_rank | timeline | trajectory
set -u
case_=$1; bin=$2; ddprun=$3
data=${DDP_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
work=$(mktemp -d "${TMPDIR:-/tmp}/ddp-example.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
need_data() {
  [ -f "$data/train-images-idx3-ubyte.gz" ] || { echo "SKIP: no Fashion-MNIST in $data (apt-get install dataset-fashion-mnist)"; exit 77; }
}
# expect_refusal NAME PATTERN CMD...: CMD must fail (rc != 0) within 30 s, before any epoch is
# trained, and rank 0 and rank 1 must both print a line matching PATTERN (ddprun prefixes).
expect_refusal() {
  name=$1; pattern=$2; shift 2
  start=$(date +%s)
  "$@" > "$work/$name" 2>&1 && { cat "$work/$name"; fail "$name: accepted"; }
  took=$(( $(date +%s) - start ))
  cat "$work/$name"
  [ "$took" -le 30 ] || fail "$name: took $took s to fail; expected a prompt refusal"
  ! grep -q '"epoch"\|^\[0\] epoch ' "$work/$name" || fail "$name: trained before refusing"
  for r in 0 1; do
    grep -q "^\[$r\] .*$pattern" "$work/$name" || fail "$name: rank $r did not say '$pattern'"
  done
  echo "ok: $name refused in $took s"
}
# A free port below the ephemeral range (tests/support/free_port.py says why).
free_port() { python3 "$(dirname "$0")/../support/free_port.py"; }
json_field() { # json_field FILE EPOCH FIELD
  grep "\"epoch\":$2," "$1" | sed -n "s/.*\"$3\":\([0-9.eE+-]*\).*/\1/p"
}

case "$case_" in
accuracy)
  need_data
  # EXAMPLE_ACCURACY_ARGS / _MIN: another example's sample count and bar (the LibTorch CNN
  # learns more slowly from few samples than the MLP).
  "$ddprun" --nproc-per-node 2 --no-prefix "$bin" --epochs 1 ${EXAMPLE_ACCURACY_ARGS:---limit 6000} --json > "$work/out" 2>&1 || { cat "$work/out"; fail "training failed"; }
  cat "$work/out"
  acc=$(json_field "$work/out" 1 test_acc)
  [ -n "$acc" ] || fail "no JSON line for epoch 1"
  min=${EXAMPLE_ACCURACY_MIN:-0.70}
  awk -v a="$acc" -v m="$min" 'BEGIN { exit !(a > m) }' || fail "test accuracy $acc is not above $min"
  echo "ok: accuracy $acc after one epoch (${EXAMPLE_ACCURACY_ARGS:---limit 6000})"
  ;;
same_global_batches)
  # 2 ranks x 64 and 1 rank x 128 see the same global batches: same loss, step by step.
  need_data
  "$ddprun" --nproc-per-node 2 "$bin" --epochs 1 --limit 2560 --batch-size 64 --quiet --step-log "$work/two" > "$work/o2" 2>&1 || { cat "$work/o2"; fail "2-rank run failed"; }
  "$ddprun" --nproc-per-node 1 "$bin" --epochs 1 --limit 2560 --batch-size 128 --quiet --step-log "$work/one" > "$work/o1" 2>&1 || { cat "$work/o1"; fail "1-rank run failed"; }
  [ "$(wc -l < "$work/two")" -eq 20 ] || fail "expected 20 steps, got $(wc -l < "$work/two")"
  # Lines are "<global step> <loss>": compare the losses.
  awk '{ print $NF }' "$work/two" > "$work/two.loss"; awk '{ print $NF }' "$work/one" > "$work/one.loss"
  paste "$work/two.loss" "$work/one.loss" | awk '
    { d = $1 - $2; if (d < 0) d = -d; r = d / ($2 > 0 ? $2 : 1); if (r > worst) worst = r }
    END { printf "worst relative difference %.3g over %d steps\n", worst, NR; exit !(NR == 20 && worst < 1e-4) }' \
    || { paste "$work/two" "$work/one"; fail "the loss curves differ"; }
  ;;
trajectory)
  # --global-batch-size keeps the trajectory across a resize: run A trains 2 ranks for 2 epochs;
  # run B trains 2 ranks, stops after 13 global steps (mid-epoch 1: 20 steps of 50 an epoch), and
  # resumes on 3 ranks (shares 17, 17, 16) and, from the same checkpoint, on 1 rank, to the end.
  # The step logs must name the same steps with losses within 1e-4 relative, and the final
  # parameters (--dump-params) within 1e-5 of the largest one: the runs differ only in float
  # summation order (how the global batch is split, and the reduction's order), a few ulps per
  # step that 40 steps of SGD at lr 0.05 carry forward without growing much (seen: 6e-8).
  need_data
  common="--data $data --epochs 2 --limit 1000 --global-batch-size 50 --quiet"
  "$ddprun" --nproc-per-node 2 "$bin" $common --step-log "$work/a.log" --dump-params "$work/a.bin" \
    --checkpoint "$work/a.ck" --checkpoint-every 7 > "$work/oa" 2>&1 || { cat "$work/oa"; fail "run A failed"; }
  "$ddprun" --nproc-per-node 2 "$bin" $common --step-log "$work/b.log" --checkpoint "$work/b.ck" \
    --stop-after-steps 13 > "$work/ob" 2>&1 || { cat "$work/ob"; fail "run B (2 ranks, stopped) failed"; }
  [ "$(wc -l < "$work/b.log")" -eq 13 ] || fail "run B logged $(wc -l < "$work/b.log") steps before stopping, not 13"
  cp "$work/b.ck" "$work/c.ck"; cp "$work/b.log" "$work/c.log"
  "$ddprun" --nproc-per-node 3 "$bin" $common --step-log "$work/b.log" --dump-params "$work/b.bin" \
    --checkpoint "$work/b.ck" --resume > "$work/ob3" 2>&1 || { cat "$work/ob3"; fail "run B resumed on 3 ranks failed"; }
  "$ddprun" --nproc-per-node 1 "$bin" $common --step-log "$work/c.log" --dump-params "$work/c.bin" \
    --checkpoint "$work/c.ck" --resume > "$work/oc" 2>&1 || { cat "$work/oc"; fail "run B resumed on 1 rank failed"; }
  for run in b c; do
    [ "$(wc -l < "$work/$run.log")" -eq 40 ] || fail "run $run logged $(wc -l < "$work/$run.log") steps, not 40"
    paste "$work/a.log" "$work/$run.log" | awk -v run="$run" '
      { if ($1 != $3) { printf "step %s logged as %s\n", $1, $3; bad = 1 }
        d = $2 - $4; if (d < 0) d = -d; r = d / ($2 > 0 ? $2 : 1); if (r > worst) worst = r }
      END { printf "run %s: losses within %.3g relative of run A over %d steps\n", run, worst, NR
            exit !(!bad && NR == 40 && worst < 1e-4) }' || { paste "$work/a.log" "$work/$run.log"; fail "run $run: the step logs differ"; }
    python3 - "$work/a.bin" "$work/$run.bin" "$run" <<'PY' || fail "run $run: the final parameters differ"
import array, sys
a, b = (array.array("f", open(p, "rb").read()) for p in sys.argv[1:3])
assert len(a) == len(b) == 235146, (len(a), len(b))
worst = max(abs(x - y) for x, y in zip(a, b)) / max(abs(x) for x in a)
print("run %s: final parameters within %.3g of the largest (%d floats)" % (sys.argv[3], worst, len(a)))
sys.exit(worst >= 1e-5)
PY
  done
  echo "ok: stopped at step 13 on 2 ranks, resumed on 3 and on 1: run A's trajectory"
  # Without --global-batch-size, a run stopped mid-epoch and resumed at its own world size is the
  # uninterrupted run bit for bit: parameters and step log.
  common="--data $data --epochs 2 --limit 1000 --batch-size 25 --quiet"
  "$ddprun" --nproc-per-node 2 "$bin" $common --step-log "$work/s.log" --dump-params "$work/s.bin" \
    > "$work/os" 2>&1 || { cat "$work/os"; fail "per-rank batches: the straight run failed"; }
  "$ddprun" --nproc-per-node 2 "$bin" $common --step-log "$work/p.log" --checkpoint "$work/p.ck" \
    --stop-after-steps 7 > "$work/op" 2>&1 || { cat "$work/op"; fail "per-rank batches: the stopped run failed"; }
  "$ddprun" --nproc-per-node 2 "$bin" $common --step-log "$work/p.log" --dump-params "$work/p.bin" \
    --checkpoint "$work/p.ck" --resume > "$work/op2" 2>&1 || { cat "$work/op2"; fail "per-rank batches: the resumed run failed"; }
  cmp "$work/s.bin" "$work/p.bin" && cmp "$work/s.log" "$work/p.log" ||
    fail "per-rank batches: stopped after 7 steps and resumed differs from the straight run"
  echo "ok: per-rank batches, stopped after step 7 and resumed: the straight run bit for bit"
  ;;
resume)
  # Two epochs, then resume for a third == three epochs straight (constant learning rate).
  need_data
  common="--limit 3000 --lr-schedule constant --json"
  "$ddprun" --nproc-per-node 2 --no-prefix "$bin" --epochs 3 $common > "$work/straight" 2>&1 || { cat "$work/straight"; fail "straight run failed"; }
  "$ddprun" --nproc-per-node 2 --no-prefix "$bin" --epochs 2 $common --checkpoint "$work/ck" > "$work/first" 2>&1 || { cat "$work/first"; fail "first half failed"; }
  [ -f "$work/ck" ] || fail "no checkpoint written"
  [ ! -e "$work/ck.tmp" ] || fail "temporary checkpoint file left behind"
  "$ddprun" --nproc-per-node 2 --no-prefix "$bin" --epochs 3 $common --checkpoint "$work/ck" --resume > "$work/second" 2>&1 || { cat "$work/second"; fail "resumed run failed"; }
  a=$(json_field "$work/straight" 3 train_loss); b=$(json_field "$work/second" 3 train_loss)
  c=$(json_field "$work/straight" 3 test_acc); d=$(json_field "$work/second" 3 test_acc)
  echo "epoch 3 straight: loss $a acc $c; resumed: loss $b acc $d"
  [ -n "$a" ] && [ "$a" = "$b" ] && [ "$c" = "$d" ] || fail "resumed training differs from straight training"
  ;;
restart)
  # ddprun --max-restarts 1: rank 1 kills itself (SIGKILL, a deterministic kill -9) in the middle of
  # epoch 2 of 3; every rank restarts in round 1 and resumes from --checkpoint. The final checkpoint
  # (parameters and momentum) must be byte-identical to an uninterrupted run's. Resumed from the end
  # of epoch 1 on one node; and, with --checkpoint-every 4, from mid-epoch 2 (the sampler's position)
  # with two ddprun as two nodes on loopback, so the failure travels through the store to node 0.
  need_data
  common="--epochs 3 --limit 1280 --batch-size 64 --json" # 10 steps per epoch on 2 ranks
  "$ddprun" --nproc-per-node 2 "$bin" $common --checkpoint "$work/straight" > "$work/o_straight" 2>&1 || { cat "$work/o_straight"; fail "straight run failed"; }
  # Step 16 is batch 6 of epoch 2; the last save before it: the end of epoch 1, or step 16 itself with
  # --checkpoint-every 4 (rank 1 dies right after it): "epoch 1, batch 6" in 0-based counts.
  for every in 0 4; do
    rm -f "$work/ck"
    start=$(date +%s)
    kill_rank1="env FASHION_MNIST_TEST_KILL=1:16"
    if [ $every -eq 0 ]; then
      $kill_rank1 "$ddprun" --nproc-per-node 2 --max-restarts 1 --grace-period 3 "$bin" $common \
        --checkpoint "$work/ck" > "$work/o_$every" 2>&1
      rc=$?
      want="at epoch 1, batch 0"
    else
      port=$(free_port)
      two="--nnodes 2 --master-port $port --nproc-per-node 1 --max-restarts 1 --grace-period 3"
      DDP_TOKEN=restart-$port $kill_rank1 "$ddprun" $two --node-rank 1 "$bin" $common --checkpoint "$work/ck" \
        --checkpoint-every $every > "$work/o_node1" 2>&1 &
      node1=$!
      DDP_TOKEN=restart-$port $kill_rank1 "$ddprun" $two --node-rank 0 "$bin" $common --checkpoint "$work/ck" \
        --checkpoint-every $every > "$work/o_$every" 2>&1
      rc=$?
      wait $node1
      rc1=$?
      cat "$work/o_node1" >> "$work/o_$every"
      [ $rc1 -eq 0 ] || { cat "$work/o_$every"; fail "node 1's ddprun exited with $rc1 after the restart, not 0"; }
      # Node 0 hears of it through the store, or from its own rank failing a moment later (peer_lost):
      # either way both nodes restart, in step.
      [ "$(grep -c "ddprun: restarting every rank: round 1" "$work/o_$every")" -eq 2 ] ||
        { cat "$work/o_$every"; fail "the two nodes did not both restart"; }
      want="at epoch 1, batch 6"
    fi
    cat "$work/o_$every"
    [ $rc -eq 0 ] || fail "--checkpoint-every $every: ddprun exited with $rc after the restart, not 0"
    grep -q "rank 1 kills itself after step 16" "$work/o_$every" || fail "the test kill did not happen"
    grep -q "ddprun: restarting every rank: round 1" "$work/o_$every" || fail "ddprun did not restart"
    grep -q "^\[0\] resumed from $work/ck $want" "$work/o_$every" || fail "round 1 did not resume $want"
    cmp "$work/straight" "$work/ck" || fail "--checkpoint-every $every: the final parameters differ from the uninterrupted run"
    echo "ok: killed mid-epoch 2, restarted, resumed $want: final checkpoint identical ($(( $(date +%s) - start )) s)"
  done
  ;;
errors)
  # Missing data: a clear error naming the file and the package, on every rank, non-zero exit.
  "$ddprun" --nproc-per-node 2 "$bin" --data "$work/nothing" --epochs 1 > "$work/missing" 2>&1 && fail "missing data did not fail"
  cat "$work/missing"
  for r in 0 1; do
    grep -q "^\[$r\] .*$work/nothing/train-images-idx3-ubyte.gz.*dataset-fashion-mnist" "$work/missing" || fail "rank $r did not name the file and the package"
  done
  need_data
  "$ddprun" --nproc-per-node 2 --no-prefix "$bin" --epochs 1 --limit 500 --quiet --checkpoint "$work/ck" > /dev/null 2>&1 || fail "could not write a checkpoint"
  # Flip one byte in the middle: the checksum must catch it on rank 0, and rank 1 must not hang.
  size=$(stat -c %s "$work/ck")
  printf '\377' | dd of="$work/ck" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
  "$ddprun" --nproc-per-node 2 "$bin" --epochs 2 --limit 500 --checkpoint "$work/ck" --resume > "$work/corrupt" 2>&1 && fail "a corrupt checkpoint was accepted"
  cat "$work/corrupt"
  grep -q "^\[0\] .*checksum mismatch" "$work/corrupt" || fail "rank 0 did not report the checksum"
  grep -q "^\[1\] .*rank 0 could not load the checkpoint" "$work/corrupt" || fail "rank 1 did not report it"

  # Numbers out of range or not numbers at all: refused by the option parser, before any data is read.
  for bad in "--lr nan" "--lr inf" "--lr 1e39" "--lr -0.1" "--lr 0" "--momentum nan" "--momentum 1.5" "--limit -1" \
             "--limit 0x10" "--epochs -1" "--epochs 2.5" "--batch-size 0" "--batch-size nan" "--seed -1"; do
    "$bin" $bad --epochs 0 > "$work/flag" 2>&1 && { cat "$work/flag"; fail "'$bad' was accepted"; }
    opt=${bad%% *}; val=${bad#* }
    grep -q -- "^$opt: '$val' must be a " "$work/flag" || { cat "$work/flag"; fail "'$bad': no clear message"; }
  done
  "$bin" --resume --epochs 0 > "$work/flag" 2>&1 && fail "--resume without --checkpoint was accepted"
  grep -q -- "--resume requires --checkpoint" "$work/flag" || { cat "$work/flag"; fail "--resume: no clear message"; }
  echo "ok: bad numbers refused with the option and the value"

  # A label outside the 10 classes (once a heap overflow in mlp::backward, rc 0): refused on every
  # rank, naming the file and the byte, before training.
  mkdir "$work/labels"
  for f in train-images-idx3-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
    ln -s "$data/$f" "$work/labels/$f"
  done
  gzip -dc "$data/train-labels-idx1-ubyte.gz" > "$work/raw-labels"
  printf '\377' | dd of="$work/raw-labels" bs=1 seek=1008 conv=notrunc 2>/dev/null # sample 1000
  gzip -c "$work/raw-labels" > "$work/labels/train-labels-idx1-ubyte.gz"
  expect_refusal label255 "$work/labels/train-labels-idx1-ubyte.gz: label 255 at byte offset 1008 of the uncompressed data (sample 1000)" \
    "$ddprun" --nproc-per-node 2 "$bin" --data "$work/labels" --epochs 1 --limit 500 --json

  # A checkpoint whose checksum is valid but whose epoch (2^63+5) is past --epochs: nothing would train.
  "$ddprun" --nproc-per-node 2 --no-prefix "$bin" --epochs 1 --limit 500 --quiet --checkpoint "$work/ck2" > /dev/null 2>&1 || fail "could not write a checkpoint"
  python3 - "$work/ck2" <<'PY' || fail "could not patch the checkpoint"
import struct, sys, zlib
path = sys.argv[1]
b = bytearray(open(path, "rb").read())
b[12:20] = struct.pack("<Q", 2**63 + 5)
b[-4:] = struct.pack("<I", zlib.crc32(bytes(b[:-4])))
open(path, "wb").write(b)
PY
  expect_refusal epoch_past "checkpoint $work/ck2: the epoch at byte offset 12 is 9223372036854775813, beyond the 2 epochs" \
    "$ddprun" --nproc-per-node 2 "$bin" --epochs 2 --limit 500 --json --checkpoint "$work/ck2" --resume
  grep -q "^\[1\] .*rank 0 could not load the checkpoint" "$work/epoch_past" || fail "rank 1 did not report the epoch"

  # Another format version (valid CRC), and a version-1 file (no position in the epoch): refused, saying which.
  python3 - "$work/ck2" "$work/ck3" "$work/ck1" <<'PY' || fail "could not write the other versions"
import struct, sys, zlib
b = bytearray(open(sys.argv[1], "rb").read())
b[8:12] = struct.pack("<I", 3)
b[-4:] = struct.pack("<I", zlib.crc32(bytes(b[:-4])))
open(sys.argv[2], "wb").write(b)
v1 = b"DDPCKPT1" + struct.pack("<QI", 1, 0)
open(sys.argv[3], "wb").write(v1 + struct.pack("<I", zlib.crc32(v1)))
PY
  expect_refusal version3 "checkpoint $work/ck3: format version 3 at byte offset 8, but this build reads version 2 only" \
    "$ddprun" --nproc-per-node 2 "$bin" --epochs 2 --limit 500 --json --checkpoint "$work/ck3" --resume
  expect_refusal version1 "checkpoint $work/ck1: format version 1 (an older build of this example)" \
    "$ddprun" --nproc-per-node 2 "$bin" --epochs 2 --limit 500 --json --checkpoint "$work/ck1" --resume

  # Checkpoint paths that cannot work fail before training, naming the path (not "basic_filebuf::underflow").
  expect_refusal dir_resume "checkpoint $work: is a directory" \
    "$ddprun" --nproc-per-node 2 "$bin" --epochs 1 --limit 500 --json --checkpoint "$work" --resume
  expect_refusal dir_save "checkpoint $work: is a directory" \
    "$ddprun" --nproc-per-node 2 "$bin" --epochs 1 --limit 500 --json --checkpoint "$work"
  expect_refusal missing_resume "checkpoint $work/none: cannot open it (No such file or directory)" \
    "$ddprun" --nproc-per-node 2 "$bin" --epochs 1 --limit 500 --json --checkpoint "$work/none" --resume
  # Unwritable as root too: the parent is a regular file. Once found only after an epoch of training.
  expect_refusal parent_is_file "checkpoint $work/ck/sub: cannot be written: creating $work/ck/sub.tmp failed (Not a directory)" \
    "$ddprun" --nproc-per-node 2 "$bin" --epochs 2 --limit 500 --json --checkpoint "$work/ck/sub"
  expect_refusal metrics_unwritable "--metrics-csv $work/ck/m.csv: cannot open it for writing" \
    "$ddprun" --nproc-per-node 2 "$bin" --epochs 1 --limit 500 --json --metrics-csv "$work/ck/m.csv"
  # A directory without write permission: root ignores permissions, so as root run as nobody.
  mkdir "$work/ro"
  if [ "$(id -u)" -ne 0 ]; then
    chmod a-w "$work/ro"
    expect_refusal read_only "checkpoint $work/ro/ck: cannot be written: .*(Permission denied)" \
      "$ddprun" --nproc-per-node 2 "$bin" --epochs 2 --limit 500 --json --checkpoint "$work/ro/ck"
  elif command -v setpriv > /dev/null && chmod 711 "$work" && chmod 755 "$work/ro" &&
       setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$bin"; then
    expect_refusal read_only "checkpoint $work/ro/ck: cannot be written: .*(Permission denied)" \
      setpriv --reuid=65534 --regid=65534 --clear-groups \
      "$ddprun" --nproc-per-node 2 "$bin" --epochs 2 --limit 500 --json --checkpoint "$work/ro/ck"
  else
    echo "note: the permission case needs a non-root user or setpriv; skipped"
  fi
  echo "ok: clear errors"
  ;;
timeline)
  # DDP_TRACE=DIR: one Chrome trace per rank with the steps' events in a sane order, and
  # scripts/plot-timeline draws a step of both ranks as a PNG.
  need_data
  DDP_TRACE="$work/tl" "$ddprun" --nproc-per-node 2 --no-prefix "$bin" --epochs 1 --limit 1280 --json > "$work/out" 2>&1 || { cat "$work/out"; fail "training failed"; }
  python3 - "$work/tl" <<'PY' || fail "the traces are not what they should be"
import json, os, sys
d = sys.argv[1]
seen_pids = set()
for rank in (0, 1):
    doc = json.load(open(os.path.join(d, f"rank_{rank}.json")))
    assert doc["otherData"]["rank"] == rank and doc["otherData"]["dropped"] == 0, doc["otherData"]
    ev = doc["traceEvents"]
    threads = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    # The group's worker ("comm") appears once it ran something; the step's last bucket
    # runs on the caller's thread when the queue is idle (it always is here: one bucket).
    assert "compute" in threads.values() and set(threads.values()) <= {"comm", "compute"}, threads
    ev = [e for e in ev if e["ph"] != "M"]
    for e in ev:
        for k in ("name", "cat", "ph", "ts", "pid", "tid", "args"):
            assert k in e, (k, e)
        assert e["ph"] != "X" or e["dur"] >= 0, e
        seen_pids.add(e["pid"])
    by = lambda n: [e for e in ev if e["name"] == n]
    steps = by("synchronize")
    assert [e["args"]["step"] for e in steps] == list(range(10)), [e["args"]["step"] for e in steps]
    assert len(by("mark_grad_ready")) == 6 * 10, len(by("mark_grad_ready"))
    launches, completes, waits = by("bucket_launch"), by("bucket_complete"), by("wait")
    assert len(launches) == len(completes) == len(waits) == 10, (len(launches), len(completes), len(waits))
    colls = [e for e in ev if e["cat"] == "collective" and e["args"]["bucket"] == 0]
    assert len(colls) == 10 and all(threads[c["tid"]] == "compute" for c in colls), colls
    for s, l, c, k in zip(steps, launches, completes, colls):
        assert l["args"]["bucket"] == c["args"]["bucket"] == 0 and l["args"]["bytes"] == 235146 * 4, (l, c)
        # launch, then its collective, then complete, all inside the step's marks and synchronize()
        assert l["ts"] <= k["ts"] <= k["ts"] + k["dur"] <= c["ts"] <= s["ts"] + s["dur"], (l, k, c, s)
assert seen_pids == {0, 1}, seen_pids
print("ok: traces of both ranks: 10 steps, 60 marks, 10 bucket launches each before their collective and completion")
PY
  plot=$(dirname "$0")/../../scripts/plot-timeline
  python3 "$plot" "$work/tl" "$work/t.png" --step 5 --stats > "$work/plot" 2>&1 || { cat "$work/plot"; fail "plot-timeline failed"; }
  cat "$work/plot"
  [ "$(head -c 8 "$work/t.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "no PNG written"
  [ "$(stat -c %s "$work/t.png")" -gt 5000 ] || fail "the PNG is suspiciously small"
  # A ring too small for the run keeps the newest events and says how many it dropped.
  DDP_TRACE="$work/small" DDP_TRACE_EVENTS=64 "$ddprun" --nproc-per-node 2 --no-prefix "$bin" --epochs 1 --limit 1280 --json > "$work/out" 2>&1 || { cat "$work/out"; fail "training with a small ring failed"; }
  python3 - "$work/small/rank_1.json" <<'PY' || fail "the wrapped ring is not what it should be"
import json, sys
doc = json.load(open(sys.argv[1]))
steps = [e["args"]["step"] for e in doc["traceEvents"] if e["name"] == "synchronize"]
assert doc["otherData"]["dropped"] > 0 and steps[-1] == 9 and steps[0] > 0, (doc["otherData"], steps[:3], steps[-3:])
print(f"ok: a 64-event ring kept steps {steps[0]}..{steps[-1]}, dropped {doc['otherData']['dropped']} events")
PY
  python3 "$plot" "$work/small" "$work/small.png" > /dev/null || fail "plot-timeline failed on a wrapped trace"
  # A DDP_TRACE that cannot be a directory is refused at start, on every rank.
  : > "$work/file"
  expect_refusal trace_dir "DDP_TRACE=$work/file is not a directory" \
    env DDP_TRACE="$work/file" "$ddprun" --nproc-per-node 2 "$bin" --epochs 1 --limit 500 --json
  echo "ok: timeline"
  ;;
local_rank)
  # torch.distributed.launch's --local_rank option (every spelling) is accepted and checked
  # against LOCAL_RANK; the launcher itself: launcher.torch_distributed_launch.example.
  LOCAL_RANK=1 "$bin" --local_rank=0 --epochs 0 > "$work/mismatch" 2>&1
  rc=$?
  cat "$work/mismatch"
  [ $rc -eq 2 ] || fail "a --local_rank that contradicts LOCAL_RANK exited with $rc, not 2"
  grep -q -- "--local_rank=0 but LOCAL_RANK=1" "$work/mismatch" || fail "the mismatch is not named"
  need_data
  for spelling in "--local_rank 0" "--local_rank=0" "--local-rank=0" "--local-rank 0"; do
    LOCAL_RANK=0 "$bin" $spelling --epochs 0 --quiet > "$work/accepted" 2>&1 || { cat "$work/accepted"; fail "'$spelling' was rejected"; }
  done
  echo "ok: --local_rank accepted in every spelling, checked against LOCAL_RANK"
  ;;
*) echo "unknown case $case_"; exit 2 ;;
esac
