#!/bin/sh
# How much gradient communication the buckets hide behind the backward on a slower link:
# bench_grad_sync's `overlap` case (ResNet-50 shapes, 25.6 M floats, size_capped buckets,
# a sleeping 16-layer backward 1.2x the communication time) on 2 ranks, over
#   loopback     both ranks on one node (the baseline, measured in the same run)
#   veth         two nodes (network namespaces, tests/netns/netns.sh), one rank each
#   veth_1gbit   the same with each veth end limited by `tc qdisc ... tbf rate 1gbit
#                burst 256kb latency 50ms` (netem is not available on this kernel)
# in ROUNDS interleaved rounds; prints one JSON line per run, then a summary line with the
# medians and the ratios against loopback. Needs root and iproute2 (exit 77 otherwise).
#   bench/grad_sync_netns.sh [BUILD_DIR [ROUNDS]]      (default: build 3)
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}; rounds=${2:-3}
ddprun=$build/tools/ddprun; bin=$build/bench/bench_grad_sync
[ -x "$ddprun" ] && [ -x "$bin" ] || { echo "build ddprun and bench_grad_sync first (cmake --build $build --target ddprun bench_grad_sync)"; exit 2; }
ddprun=$(cd "$(dirname "$ddprun")" && pwd)/ddprun; bin=$(cd "$(dirname "$bin")" && pwd)/bench_grad_sync
work=$(mktemp -d "${TMPDIR:-/tmp}/ddp-gsnetns.XXXXXX")
trap 'rm -rf "$work"' EXIT
export DDP_TIMEOUT=120s

# One rank per node; node 0's output (rank 0 prints the JSON) to stdout.
cat > "$work/two_nodes.sh" <<'EOF'
set -u
DDP_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n'); export DDP_TOKEN
for n in 1 0; do
  eval "ifc=\$DDP_NETNS_IF$n"
  GLOO_SOCKET_IFNAME=$ifc $DDP_NETNS_EXEC $n "$1" --nnodes 2 --node-rank $n --nproc-per-node 1 --no-prefix \
    --master-addr "$DDP_NETNS_ADDR0" --master-port 29500 "$2" overlap > "$3.$n" 2>&1 &
done
wait
cat "$3.0"
EOF

run() { # run CONFIG: one JSON line, with "link" added
  case $1 in
  loopback) "$ddprun" --nproc-per-node 2 --no-prefix "$bin" overlap > "$work/out" 2>&1 ;;
  veth) sh "$here/../tests/netns/netns.sh" -- sh "$work/two_nodes.sh" "$ddprun" "$bin" "$work/n" > "$work/out" 2>&1 ;;
  veth_1gbit) sh "$here/../tests/netns/netns.sh" --rate 1gbit -- sh "$work/two_nodes.sh" "$ddprun" "$bin" "$work/n" > "$work/out" 2>&1 ;;
  esac
  rc=$?
  [ $rc -eq 77 ] && { cat "$work/out"; exit 77; }
  line=$(grep '"case":"overlap_resnet50"' "$work/out")
  [ $rc -eq 0 ] && [ -n "$line" ] || { cat "$work/out" >&2; echo "{\"link\":\"$1\",\"error\":\"exit $rc\"}"; return 1; }
  echo "{\"link\":\"$1\",${line#\{}"
}

for r in $(seq "$rounds"); do
  for cfg in loopback veth veth_1gbit; do
    run "$cfg" | tee -a "$work/all"
  done
done
python3 - "$work/all" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
out = {"case": "grad_sync_netns", "rounds": 0}
for link in ("loopback", "veth", "veth_1gbit"):
    rs = [r for r in runs if r.get("link") == link and "comm_s" in r]
    if not rs:
        continue
    out["rounds"] = max(out["rounds"], len(rs))
    out[link] = {k: round(statistics.median(r[k] for r in rs), 6)
                 for k in ("comm_s", "backward_s", "step_s", "hidden_fraction")}
    # What is not hidden: step minus backward, the time the step waits on communication.
    out[link]["exposed_s"] = round(statistics.median(r["step_s"] - r["backward_s"] for r in rs), 6)
base = out.get("loopback")
for link in ("veth", "veth_1gbit"):
    if base and link in out:
        out[link + "_vs_loopback"] = {
            "comm_ratio": round(out[link]["comm_s"] / base["comm_s"], 3),
            "hidden_fraction_diff": round(out[link]["hidden_fraction"] - base["hidden_fraction"], 3),
        }
print(json.dumps(out))
EOF
