#!/bin/sh
# Two "nodes" on one host: two network namespaces joined by a veth pair, each with
# loopback up and an address of its own on the veth. For tests and benchmarks that
# need a real link between nodes (tests/netns/two_nodes.sh, bench/grad_sync_netns.sh).
#
# As a wrapper (needs root and iproute2; exits 77, "skipped", with the reason otherwise):
#   tests/netns/netns.sh [--rate 1gbit] [--nodes N] -- CMD [ARGS...]
# creates the nodes, runs CMD in the root namespace with these exported, and removes
# the namespaces and links when CMD ends, fails or is interrupted (EXIT INT TERM HUP):
#   DDP_NETNS0 DDP_NETNS1   namespace names (ddp-<pid>-<rand>-n0/-n1: unique per run)
#   DDP_NETNS_IF0 DDP_NETNS_IF1     the veth end in node 0 / node 1
#   DDP_NETNS_ADDR0 DDP_NETNS_ADDR1 their addresses (10.231.X.1 and 10.231.X.2, /24)
#   DDP_NETNS_EXEC          "<this script> exec": `$DDP_NETNS_EXEC 1 cmd...` runs cmd on node 1
# --rate R limits each veth end's egress with `tc qdisc ... tbf rate R` (netem is not
# available on the kernel these tests run on; tbf is).
# --nodes N (default 2; up to 9) adds nodes 2..N-1 (ddp-...-n2, ...), each on a veth pair whose
# node-0 end joins a bridge in node 0 with node 0's own veth: node 0's address moves to that
# bridge (then DDP_NETNS_IF0), node K is 10.231.X.(K+1) on DDP_NETNS_IFK. DDP_NETNS_NODES = N.
#
#   tests/netns/netns.sh exec NODE CMD [ARGS...]   (inside a wrapper run) CMD on node NODE
#
# Sourced (`. tests/netns/netns.sh`), it defines netns_up [RATE], netns_exec NODE CMD...
# and netns_down, and leaves traps to the caller (netns_down is safe to call twice).

netns_skip_reason() {
  if [ "$(id -u)" != 0 ]; then echo "not root (network namespaces need CAP_SYS_ADMIN)"; return 0; fi
  command -v ip >/dev/null 2>&1 || { echo "ip (iproute2) is missing"; return 0; }
  return 1
}

# Everything netns_down must undo, recorded as soon as it exists (kept when inherited:
# `netns.sh exec` reads them).
: "${DDP_NETNS0:=}" "${DDP_NETNS1:=}" "${DDP_NETNS_NODES:=2}"
_netns_link=""

netns_down() {
  k=0
  while [ $k -lt "$DDP_NETNS_NODES" ] || [ $k -lt 2 ]; do
    eval "ns=\${DDP_NETNS$k:-}"
    eval "DDP_NETNS$k=''"
    k=$((k + 1))
    [ -n "$ns" ] || continue
    # Processes still inside would keep the namespace (and its veth end) alive after
    # `ip netns del`: they are ours (this run created the namespace), so end them.
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  # A veth end that never reached its namespace (setup failed half-way).
  [ -n "$_netns_link" ] && ip link del "$_netns_link" 2>/dev/null
  DDP_NETNS0=""; DDP_NETNS1=""; _netns_link=""
  return 0
}

# netns_more_nodes N RATE: nodes 2..N-1 on a bridge in node 0 (see --nodes); 1 on failure.
netns_more_nodes() {
  nodes=$1; rate=$2
  n0=$DDP_NETNS0; br=ddpbr0
  { ip -n "$n0" link add "$br" type bridge && ip -n "$n0" addr del "$DDP_NETNS_ADDR0/24" dev "$DDP_NETNS_IF0" &&
    ip -n "$n0" link set "$DDP_NETNS_IF0" master "$br" && ip -n "$n0" addr add "$DDP_NETNS_ADDR0/24" dev "$br" &&
    ip -n "$n0" link set "$br" up; } || { echo "netns: the bridge in $n0 failed"; return 1; }
  DDP_NETNS_IF0=$br
  k=2
  while [ $k -lt "$nodes" ]; do
    ns=${n0%-n0}-n$k; hub=${DDP_NETNS_IF1%b}c$k; ifk=${DDP_NETNS_IF1%b}d$k
    ip netns add "$ns" || { echo "netns: ip netns add $ns failed"; return 1; }
    eval "DDP_NETNS$k=$ns"
    DDP_NETNS_NODES=$((k + 1)) # netns_down removes it from now on
    ip link add "$hub" type veth peer name "$ifk" || { echo "netns: ip link add $hub veth failed"; return 1; }
    _netns_link=$hub
    { ip link set "$hub" netns "$n0" && ip link set "$ifk" netns "$ns"; } || { echo "netns: moving $hub/$ifk failed"; return 1; }
    _netns_link=""
    addr=${DDP_NETNS_ADDR0%.1}.$((k + 1))
    { ip -n "$n0" link set "$hub" master "$br" && ip -n "$n0" link set "$hub" up && ip -n "$ns" link set lo up &&
      ip -n "$ns" addr add "$addr/24" dev "$ifk" && ip -n "$ns" link set "$ifk" up; } ||
      { echo "netns: configuring node $k failed"; return 1; }
    if [ -n "$rate" ] && ! tc -n "$ns" qdisc add dev "$ifk" root tbf rate "$rate" burst 256kb latency 50ms; then
      echo "netns: tc tbf rate $rate on $ifk failed"; return 1
    fi
    eval "DDP_NETNS_IF$k=$ifk; DDP_NETNS_ADDR$k=$addr"
    export "DDP_NETNS$k" "DDP_NETNS_IF$k" "DDP_NETNS_ADDR$k"
    k=$((k + 1))
  done
  k=2
  while [ $k -lt "$nodes" ]; do # every added node's link, not only the last one's
    eval "ns=\$DDP_NETNS$k; ifk=\$DDP_NETNS_IF$k"
    i=0
    until [ "$(ip netns exec "$ns" cat "/sys/class/net/$ifk/operstate" 2>/dev/null)" = up ]; do
      i=$((i + 1))
      [ $i -lt 50 ] || { echo "netns: $ifk in $ns did not come up"; return 1; }
      sleep 0.1
    done
    k=$((k + 1))
  done
  export DDP_NETNS_IF0 DDP_NETNS_NODES
  return 0
}

# Nodes left by a run that was killed with SIGKILL (no trap runs then): only names of
# this harness's own form, ddp-<pid>-<rand>-n0/1, whose <pid> no longer exists.
netns_sweep_stale() {
  for ns in $(ip netns list 2>/dev/null | sed -n 's/^\(ddp-[0-9]*-[0-9]*-n[0-9]\)\( .*\)*$/\1/p'); do
    pid=${ns#ddp-}; pid=${pid%%-*}
    if ! kill -0 "$pid" 2>/dev/null; then
      pids=$(ip netns pids "$ns" 2>/dev/null)
      [ -n "$pids" ] && kill -9 $pids 2>/dev/null
      ip netns del "$ns" 2>/dev/null && echo "netns: removed $ns, left by a killed run (pid $pid)"
    fi
  done
  return 0
}

# netns_up [RATE]: creates the two nodes; on failure says why, cleans up, returns 1.
netns_up() {
  rate=${1:-}
  # Unique per run: the pid and 16 random bits (helpers run in parallel on one host).
  rnd=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
  tag=$$-$rnd
  x=$(( rnd % 250 + 1 ))
  # Interface names are at most 15 characters.
  if0=vd$(printf '%x' "$$")$(printf '%04x' "$rnd")a
  if1=${if0%a}b
  DDP_NETNS0=""; DDP_NETNS1=""
  ip netns add "ddp-$tag-n0" || { echo "netns: ip netns add ddp-$tag-n0 failed"; return 1; }
  DDP_NETNS0=ddp-$tag-n0
  ip netns add "ddp-$tag-n1" || { echo "netns: ip netns add ddp-$tag-n1 failed"; netns_down; return 1; }
  DDP_NETNS1=ddp-$tag-n1
  ip link add "$if0" type veth peer name "$if1" || { echo "netns: ip link add $if0 veth failed"; netns_down; return 1; }
  _netns_link=$if0
  if ! { ip link set "$if0" netns "$DDP_NETNS0" && ip link set "$if1" netns "$DDP_NETNS1"; }; then
    echo "netns: moving the veth ends failed"; netns_down; return 1
  fi
  _netns_link="" # both ends now go with their namespaces
  DDP_NETNS_IF0=$if0; DDP_NETNS_IF1=$if1
  DDP_NETNS_ADDR0=10.231.$x.1; DDP_NETNS_ADDR1=10.231.$x.2
  for n in 0 1; do
    eval "ns=\$DDP_NETNS$n; ifc=\$DDP_NETNS_IF$n; addr=\$DDP_NETNS_ADDR$n"
    if ! { ip -n "$ns" link set lo up && ip -n "$ns" addr add "$addr/24" dev "$ifc" &&
           ip -n "$ns" link set "$ifc" up; }; then
      echo "netns: configuring $ifc in $ns failed"; netns_down; return 1
    fi
    if [ -n "$rate" ] && ! tc -n "$ns" qdisc add dev "$ifc" root tbf rate "$rate" burst 256kb latency 50ms; then
      echo "netns: tc tbf rate $rate on $ifc failed"; netns_down; return 1
    fi
  done
  # A veth end is operationally up once both ends are (no ping on every host: read the state).
  i=0
  until [ "$(ip netns exec "$DDP_NETNS1" cat "/sys/class/net/$if1/operstate" 2>/dev/null)" = up ]; do
    i=$((i + 1))
    [ $i -lt 50 ] || { echo "netns: $if1 in $DDP_NETNS1 did not come up"; netns_down; return 1; }
    sleep 0.1
  done
  export DDP_NETNS0 DDP_NETNS1 DDP_NETNS_IF0 DDP_NETNS_IF1 DDP_NETNS_ADDR0 DDP_NETNS_ADDR1
  return 0
}

# netns_exec NODE CMD...: CMD in node NODE's namespace (needs DDP_NETNS0/1).
netns_exec() {
  node=$1; shift
  eval "ns=\$DDP_NETNS$node"
  [ -n "$ns" ] || { echo "netns: no node $node (DDP_NETNS$node is empty)" >&2; return 2; }
  ip netns exec "$ns" "$@"
}

# Run as a program (not sourced): the wrapper and `exec`.
case "${0##*/}" in
netns.sh)
  self=$(cd "$(dirname "$0")" && pwd)/netns.sh
  if [ "${1:-}" = exec ]; then
    shift
    netns_exec "$@"
    exit $?
  fi
  rate=""; nodes=2
  while [ $# -gt 0 ]; do
    case "$1" in
    --rate) rate=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --) shift; break ;;
    *) break ;;
    esac
  done
  [ $# -gt 0 ] || { echo "usage: netns.sh [--rate R] [--nodes N] -- CMD [ARGS...] | netns.sh exec NODE CMD..."; exit 2; }
  case "$nodes" in [2-9]) ;; *) echo "netns.sh: --nodes $nodes: 2 to 9 nodes"; exit 2 ;; esac
  if reason=$(netns_skip_reason); then echo "SKIP: $reason"; exit 77; fi
  DDP_NETNS0=""; DDP_NETNS1=""; DDP_NETNS_NODES=2 # never an outer run's nodes
  child=""
  # On a signal: stop CMD (ours), then the EXIT trap removes the nodes.
  on_signal() { [ -n "$child" ] && kill "$child" 2>/dev/null; exit "$1"; }
  trap netns_down EXIT
  trap 'on_signal 130' INT
  trap 'on_signal 143' TERM
  trap 'on_signal 129' HUP
  trap 'on_signal 141' PIPE
  netns_sweep_stale
  netns_up "$rate" || exit 1
  if [ "$nodes" -gt 2 ]; then netns_more_nodes "$nodes" "$rate" || exit 1; fi
  DDP_NETNS_EXEC="$self exec"; export DDP_NETNS_EXEC
  # In the background and waited for, so that a signal interrupts the wait and the
  # traps run at once (a foreground CMD would delay them until it ends).
  "$@" <&0 &
  child=$!
  wait "$child"
  rc=$?
  child=""
  exit $rc
  ;;
esac
