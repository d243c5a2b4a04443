#!/bin/sh
# A joiner that dies right after it arrived at its admission meeting: the meeting has published
# it as a member, and it never connects to the new generation. How long until the survivors'
# next step? Before the members' wait looked at the joiners' lost marks, it waited DDP_TIMEOUT.
#
# One round, under ddprun --in-process-recovery --max-restarts 2, 3 ranks: ranks 1 and 2 are
# killed after step 30; rank 0 goes on alone (generation 1) and is held after step 31 until both
# joiners ddprun started have registered. The joiner of rank 2 is stopped (SIGSTOP), so the admission
# meeting (generation 2) waits its last call (3 s) for it; the joiner of rank 1 arrives meanwhile and is
# stopped 1 s after the admission, so the meeting publishes it as a member and it never connects.
# Once the last call is over, that joiner is killed (SIGKILL): the time from that kill to rank 0's
# first step in generation 3 (world 1) is the figure. DDP_TIMEOUT is 15 s here.
#
#   bench/elastic_dead_joiner.sh ROUNDS DDPRUN WORKER [DDPRUN_BEFORE WORKER_BEFORE]
# With a second pair (a build before the change), the rounds alternate between the two and the
# JSON gives both medians and their ratio.
set -u
rounds=$1; after_ddprun=$2; after_worker=$3
before_ddprun=${4:-}; before_worker=${5:-}
dir=$(mktemp -d "${TMPDIR:-/tmp}/ddp-dead-joiner.XXXXXX")
launcher=
trap '[ -n "$launcher" ] && kill -9 "$launcher" 2>/dev/null; rm -rf "$dir"' EXIT
export DDP_TIMEOUT=15s

wait_for() { # LOG PATTERN SECONDS
  i=0
  until grep -q "$2" "$1" 2>/dev/null; do
    i=$((i + 1)); [ $i -le $(($3 * 20)) ] || { echo "not seen within $3 s: $2" >&2; cat "$1" >&2; return 1; }
    sleep 0.05
  done
}

# one_round DDPRUN WORKER NAME [check-path]: prints the milliseconds from the kill to generation 3's first step;
# returns 2 for a round that took another path (the joiner not published as a member of generation
# 2, or ddprun not exiting 0): it measured something else, and is not counted.
one_round() {
  out="$dir/$3"; log="$out.log"
  rm -rf "$out"; mkdir -p "$out"
  ELASTIC_PAUSE=1:30:600000,2:30:600000,0:31:60000:1 ELASTIC_LAST_CALL_MS=3000 \
    "$1" --in-process-recovery --max-restarts 2 --grace-period 2 --no-prefix --nproc-per-node 3 \
    "$2" recover "$out" 120 10 10 >"$log" 2>&1 &
  launcher=$!
  wait_for "$log" '^PAUSED rank=1 step=30$' 30 && wait_for "$log" '^PAUSED rank=2 step=30$' 30 || return 1
  for r in 1 2; do kill -9 "$(sed -n "s/^PID rank=$r pid=\([0-9]*\)\$/\1/p" "$log")"; done
  wait_for "$log" 'joiner rank1\.[0-9]*.*registered' 30 && wait_for "$log" 'joiner rank2\.[0-9]*.*registered' 30 || return 1
  wait_for "$log" '^PAUSED rank=0 step=31$' 30 || return 1
  j1=$(sed -n 's/^JOINER-PID rank=1 pid=\([0-9]*\) .*/\1/p' "$log")
  j2=$(sed -n 's/^JOINER-PID rank=2 pid=\([0-9]*\) .*/\1/p' "$log")
  kill -STOP "$j2"
  touch "$out/resume.0.31" # rank 0 commits step 40 and admits both joiners
  sleep 1
  kill -STOP "$j1" # it arrived (it polls every 20 ms); the meeting waits for the other joiner
  sleep 3          # the last call is over: the stopped joiner is a published member
  kill_ns=$(date +%s%N)
  kill -9 "$j1"
  wait_for "$log" '^RECOVERED generation=3 world=1 ' 60 || return 1
  first=$(sed -n 's/^RECOVERED generation=3 world=1 .*first_step_ns=\([0-9]*\)$/\1/p' "$log" | head -1)
  i=0
  while kill -0 "$launcher" 2>/dev/null && [ $i -lt 600 ]; do i=$((i + 1)); sleep 0.1; done
  kill -9 "$launcher" 2>/dev/null; kill -9 "$j2" 2>/dev/null
  wait "$launcher" 2>/dev/null
  rc=$?
  launcher=
  # The killed joiner was a published member of generation 2: its verdict names it absent.
  # (Only the build under test says so: an older one words the end of that wait differently.)
  if [ "$4" = check-path ] && ! grep -q 'generation 2 lost a peer (.*member(s) [0-9, ]* taken for absent' "$log"; then
    echo "round $3: the joiner was not a published member of generation 2 (another path); not counted" >&2
    return 2
  fi
  if [ "$rc" -ne 0 ]; then
    echo "round $3: ddprun exited $rc, not 0 (another path); not counted" >&2
    return 2
  fi
  echo $(( (first - kill_ns) / 1000000 ))
}

# counted_round DDPRUN WORKER NAME FILE [check-path]: one counted round's figure into FILE, up to 3 tries.
counted_round() {
  try=0
  while [ $try -lt 3 ]; do
    try=$((try + 1))
    ms=$(one_round "$1" "$2" "$3.$try" "${5:-}"); st=$?
    [ $st -eq 0 ] && { echo "$ms" >>"$4"; return 0; }
    [ $st -eq 2 ] || return 1
  done
  return 1
}

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

: >"$dir/after.ms"; : >"$dir/before.ms"
k=0
while [ $k -lt "$rounds" ]; do
  k=$((k + 1))
  counted_round "$after_ddprun" "$after_worker" "after$k" "$dir/after.ms" check-path || { echo "round $k (after) failed" >&2; exit 1; }
  if [ -n "$before_ddprun" ]; then
    counted_round "$before_ddprun" "$before_worker" "before$k" "$dir/before.ms" || { echo "round $k (before) failed" >&2; exit 1; }
  fi
done
after=$(median <"$dir/after.ms")
list() { paste -sd, "$1"; }
if [ -n "$before_ddprun" ]; then
  before=$(median <"$dir/before.ms")
  ratio=$(awk -v b="$before" -v a="$after" 'BEGIN { printf "%.1f", b / a }')
  printf '{"bench":"elastic_dead_joiner","ddp_timeout_ms":15000,"rounds":%s,"after_ms":[%s],"before_ms":[%s],"after_median_ms":%s,"before_median_ms":%s,"before_over_after":%s}\n' \
    "$rounds" "$(list "$dir/after.ms")" "$(list "$dir/before.ms")" "$after" "$before" "$ratio"
else
  printf '{"bench":"elastic_dead_joiner","ddp_timeout_ms":15000,"rounds":%s,"after_ms":[%s],"after_median_ms":%s}\n' \
    "$rounds" "$(list "$dir/after.ms")" "$after"
fi
