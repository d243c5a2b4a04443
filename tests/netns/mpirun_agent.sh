#!/bin/sh
# Open MPI's launch agent for the two namespaced nodes of tests/netns/netns.sh
# (mpirun --mca plm_rsh_agent THIS): called as "THIS HOST CMD...", like ssh, it runs
# CMD (the orted daemon) in the namespace of the node whose veth has address HOST.
host=$1; shift
case "$host" in
"$DDP_NETNS_ADDR0") ns=$DDP_NETNS0 ;;
"$DDP_NETNS_ADDR1") ns=$DDP_NETNS1 ;;
*) echo "mpirun_agent: $host is neither node ($DDP_NETNS_ADDR0, $DDP_NETNS_ADDR1)" >&2; exit 255 ;;
esac
exec ip netns exec "$ns" sh -c "$*"
