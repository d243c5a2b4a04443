#!/usr/bin/env bash
# The time from a rank's death to the first step of the job after it: in-process recovery
# (ddprun --in-process-recovery, ddp::elastic::run: the survivors go on at world 2) against a
# full restart from a checkpoint (ddprun --max-restarts 1: every rank starts again at world 3
# and loads the checkpoint of the last 10 steps). The job of tests/dist/elastic_recovery_worker
# (3 ranks, 120 steps of 10 ms, a commit or checkpoint every 10 steps), rank 2 killed with
# kill -9 once step 30 is done; the kinds interleaved round by round. A third kind, joiner
# (--in-process-recovery --max-restarts 1), times the kill to the first step of the world of 3
# again: the survivors' generation, then the joiner ddprun started, admitted at a commit and
# sent their state (docs/elastic.md, Joiners). Medians; one JSON line.
#   bench/elastic_recovery.sh [BUILD_DIR] [ROUNDS] [GRACE_PERIOD]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
rounds=${2:-7}
grace=${3:-5}
cmake --build "$build" --target ddprun elastic_recovery_worker > /dev/null
tmp=$(mktemp -d)
launcher=
trap '[ -n "$launcher" ] && kill -9 "$launcher" 2>/dev/null; rm -rf "$tmp"' EXIT
export DDP_TIMEOUT=60s
one() { # kind: prints the milliseconds from the kill to the first step after it
  local kind=$1 log="$tmp/$1.log" mode=recover
  local -a flags=(--in-process-recovery)
  local pattern='^RECOVERED '
  if [ "$kind" = restart ]; then mode=restart; flags=(--max-restarts 1 --grace-period "$grace"); fi
  if [ "$kind" = joiner ]; then flags+=(--max-restarts 1); pattern='^RECOVERED generation=2 world=3 '; fi
  rm -rf "$tmp/out" "$log" && mkdir -p "$tmp/out" # the log too: a stale one would be read before the new one opens
  "$build/tools/ddprun" "${flags[@]}" --no-prefix --nproc-per-node 3 "$build/tests/elastic_recovery_worker" \
    "$mode" "$tmp/out" 120 10 10 > "$log" 2>&1 &
  launcher=$!
  local i=0
  until grep -q '^STEP 30 world=3' "$log" 2>/dev/null; do
    i=$((i + 1)); [ $i -le 1500 ] || { cat "$log" >&2; echo "elastic_recovery.sh: no step 30 in 30 s" >&2; exit 1; }
    sleep 0.02
  done
  local victim kill_ns first
  victim=$(sed -n 's/^PID rank=2 pid=\([0-9]*\)$/\1/p' "$log" | head -1)
  kill_ns=$(date +%s%N)
  kill -9 "$victim"
  wait "$launcher" || { cat "$log" >&2; echo "elastic_recovery.sh: the $kind job failed" >&2; exit 1; }
  launcher=
  first=$(grep "$pattern" "$log" | sed -n 's/.*first_step_ns=\([0-9]*\)$/\1/p' | sort -n | head -1)
  [ -n "$first" ] || { cat "$log" >&2; echo "elastic_recovery.sh: the $kind job printed no '$pattern' line" >&2; exit 1; }
  echo $(( (first - kill_ns) / 1000000 ))
}
inproc=() restart=() joiner=()
for r in $(seq "$rounds"); do
  if [ $((r % 2)) -eq 0 ]; then inproc+=("$(one inproc)"); restart+=("$(one restart)"); joiner+=("$(one joiner)")
  else joiner+=("$(one joiner)"); restart+=("$(one restart)"); inproc+=("$(one inproc)"); fi
done
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
mi=$(median "${inproc[@]}") mr=$(median "${restart[@]}") mj=$(median "${joiner[@]}")
echo "{\"bench\":\"elastic_recovery\",\"rounds\":$rounds,\"grace_period_s\":$grace,\"in_process_ms\":$mi," \
     "\"full_restart_ms\":$mr,\"restart_over_in_process\":$(awk -v a="$mr" -v b="$mi" 'BEGIN { printf "%.1f", a / (b > 0 ? b : 1) }')," \
     "\"world_3_with_joiner_ms\":$mj,\"restart_over_joiner\":$(awk -v a="$mr" -v b="$mj" 'BEGIN { printf "%.2f", a / (b > 0 ? b : 1) }'),"\
     "\"in_process_runs_ms\":[$(IFS=,; echo "${inproc[*]}")],\"full_restart_runs_ms\":[$(IFS=,; echo "${restart[*]}")],"\
     "\"joiner_runs_ms\":[$(IFS=,; echo "${joiner[*]}")]}" | tr -d '\n'
echo
