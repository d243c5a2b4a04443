#!/bin/sh
# dist.ddprun.note_dir: the folder of the ranks' failure notes (DDP_FAILURE_FILE, see
# tools/ddprun/failure_notes.hpp) lies under $TMPDIR, is private to the user, and is gone when
# the job ends; a TMPDIR that does not exist, or a relative one (with a warning), falls back
# to /tmp.
#   ddprun_note_dir.sh DDPRUN
set -eu
ddprun=$1
fail() { echo "FAILED: $*"; echo "$out"; exit 1; }
base=${TMPDIR:-/tmp}
case $base in /*) ;; *) base=/tmp ;; esac # this test's own TMPDIR may be relative too
d=$(mktemp -d "$base/ddprun-note-dir-test.XXXXXX")
trap 'rm -rf "$d"' EXIT

# Each rank prints where its note would go and that folder's mode.
show='f=$DDP_FAILURE_FILE; echo "note=$f"; echo "mode=$(stat -c %a "$(dirname "$f")")"'
out=$(TMPDIR="$d" "$ddprun" --nproc-per-node 2 --no-prefix sh -c "$show" 2>&1) || fail "the job failed"
[ "$(echo "$out" | grep -c "^note=$d/ddprun-[A-Za-z0-9]\{6\}/failures\$")" = 2 ] || fail "both notes under TMPDIR=$d"
[ "$(echo "$out" | grep -c '^mode=700$')" = 2 ] || fail "the folder is private (0700)"
[ "$(echo "$out" | grep '^note=' | sort -u | wc -l)" = 1 ] || fail "one folder for the round's ranks"
[ -z "$(ls -A "$d")" ] || { out=$(ls -la "$d"); fail "the folder is removed when the job ends"; }

out=$(TMPDIR="$d/missing" "$ddprun" --nproc-per-node 1 --no-prefix sh -c "$show" 2>&1) || fail "the job failed"
echo "$out" | grep -q '^note=/tmp/ddprun-[A-Za-z0-9]\{6\}/failures$' || fail "TMPDIR missing: under /tmp"
out=$(cd "$d" && TMPDIR=. "$ddprun" --nproc-per-node 1 --no-prefix sh -c "$show" 2>&1) || fail "the job failed"
echo "$out" | grep -q '^note=/tmp/ddprun-[A-Za-z0-9]\{6\}/failures$' || fail "TMPDIR relative: under /tmp"
echo "$out" | grep -q 'warning: TMPDIR=\. is not an absolute path' || fail "TMPDIR relative: a warning says so"
[ -z "$(ls -A "$d")" ] || { out=$(ls -la "$d"); fail "TMPDIR relative: nothing left in the working folder"; }
echo "ok"
