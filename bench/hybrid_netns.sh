#!/bin/sh
# Hybrid against flat sharding across two nodes: bench_hybrid_step (Adam, FLOATS floats in 64
# tensors) on two nodes (network namespaces, tests/netns/netns.sh) of 2 ranks each, Gloo on the
# veth; each run times both (and hybrid with its shard group over TCP, hybrid_tcp) in the same
# process, alternating, and counts the bytes that cross the veth during their steps. Two links:
#   veth         the veth pair as it is (about as fast as loopback here)
#   veth_1gbit   each veth end limited by `tc qdisc ... tbf rate 1gbit` (netns.sh --rate)
# ROUNDS rounds of one run per link; prints each run's JSON line (with "link"), then a summary
# line with, per link, the medians over the runs of each run's medians and ratios. Needs root
# and iproute2 (exit 77 otherwise).
#   bench/hybrid_netns.sh [BUILD_DIR [ROUNDS [FLOATS]]]      (default: build 3 4194304)
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}; rounds=${2:-3}; floats=${3:-4194304}
ddprun=$build/tools/ddprun; bin=$build/bench/bench_hybrid_step
[ -x "$ddprun" ] && [ -x "$bin" ] || { echo "build ddprun and bench_hybrid_step first (cmake --build $build --target ddprun bench_hybrid_step)"; exit 2; }
ddprun=$(cd "$(dirname "$ddprun")" && pwd)/ddprun; bin=$(cd "$(dirname "$bin")" && pwd)/bench_hybrid_step
work=$(mktemp -d "${TMPDIR:-/tmp}/ddp-hybnetns.XXXXXX")
trap 'rm -rf "$work"' EXIT
export DDP_TIMEOUT=120s

# Two ranks per node; node 0's output (rank 0 prints the JSON) to stdout.
cat > "$work/two_nodes.sh" <<'EOS'
set -u
DDP_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n'); export DDP_TOKEN
for n in 1 0; do
  eval "ifc=\$DDP_NETNS_IF$n"
  GLOO_SOCKET_IFNAME=$ifc $DDP_NETNS_EXEC $n "$1" --nnodes 2 --node-rank $n --nproc-per-node 2 --no-prefix \
    --master-addr "$DDP_NETNS_ADDR0" --master-port 29500 "$2" 9 "$4" > "$3.$n" 2>&1 &
done
wait
cat "$3.0" "$3.1"
EOS

for r in $(seq "$rounds"); do
  for link in veth veth_1gbit; do
    rate=""; [ $link = veth_1gbit ] && rate="--rate 1gbit"
    sh "$here/../tests/netns/netns.sh" $rate -- sh "$work/two_nodes.sh" "$ddprun" "$bin" "$work/n" "$floats" > "$work/out" 2>&1
    rc=$?
    [ $rc -eq 77 ] && { cat "$work/out"; exit 77; }
    line=$(grep '"case":"hybrid_vs_flat_adam"' "$work/out")
    [ $rc -eq 0 ] && [ -n "$line" ] || { cat "$work/out" >&2; echo "{\"link\":\"$link\",\"error\":\"exit $rc\"}"; exit 1; }
    echo "{\"link\":\"$link\",${line#\{}" | tee -a "$work/all"
  done
done
python3 - "$work/all" <<'EOP'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
out = {"case": "hybrid_netns", "ranks": runs[0]["ranks"], "nodes": runs[0]["nodes"], "floats": runs[0]["floats"]}
for link in ("veth", "veth_1gbit"):
    rs = [r for r in runs if r["link"] == link]
    o = {"rounds": len(rs)}
    for k in ("flat_ms", "hybrid_ms", "hybrid_over_flat", "flat_cross_node_bytes", "hybrid_cross_node_bytes",
              "bytes_hybrid_over_flat", "hybrid_tcp_ms", "hybrid_tcp_over_flat", "hybrid_over_hybrid_tcp"):
        o[k] = round(statistics.median(r[k] for r in rs), 3)
    o["hybrid_over_flat_range"] = [min(r["hybrid_over_flat"] for r in rs), max(r["hybrid_over_flat"] for r in rs)]
    o["hybrid_over_hybrid_tcp_range"] = [min(r["hybrid_over_hybrid_tcp"] for r in rs),
                                         max(r["hybrid_over_hybrid_tcp"] for r in rs)]
    o["shard_group_shm"] = all(r["shard_group_shm"] for r in rs)
    out[link] = o
print(json.dumps(out))
EOP
