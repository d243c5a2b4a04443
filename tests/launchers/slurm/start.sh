#!/bin/bash
# Start a single-node SLURM (munged + slurmctld + slurmd) whose state lives in DIR.
# Usage: start.sh DIR   then: export SLURM_CONF=DIR/slurm.conf ; srun -n 2 ... ; stop.sh DIR
# Checked on this kind of machine: up in about 1 s; needs Debian's slurm-wlm and munge.
set -euo pipefail
D=${1:?usage: start.sh DIR}
here=$(cd "$(dirname "$0")" && pwd)
command -v slurmctld >/dev/null || { echo "slurm-wlm is not installed"; exit 77; }
mkdir -p "$D"; chmod 755 "$D"   # munged wants o+x on every directory above its socket
H=$(hostname -s)
sed -e "s#@DIR@#$D#g" -e "s/^SlurmctldHost=.*/SlurmctldHost=$H/" -e "s/^NodeName=[^ ]*/NodeName=$H/" \
    -e "s/^PartitionName=debug Nodes=[^ ]*/PartitionName=debug Nodes=$H/" "$here/slurm.conf.in" > "$D/slurm.conf"
export SLURM_CONF=$D/slurm.conf
rm -rf "$D/state" "$D/spool" "$D/log"
mkdir -p "$D/state" "$D/spool/slurmd.$H" "$D/log" "$D/munge"
chmod 755 "$D/munge"                      # munged wants o+x on its socket directory
[ -f "$D/munge/munge.key" ] || install -m 600 /etc/munge/munge.key "$D/munge/munge.key"
munged --socket="$D/munge/munge.socket.2" --key-file="$D/munge/munge.key" \
       --log-file="$D/munge/munged.log" --pid-file="$D/munge/munged.pid" --seed-file="$D/munge/munged.seed"
for i in $(seq 50); do [ -S "$D/munge/munge.socket.2" ] && break; sleep 0.1; done
nohup slurmctld -D -f "$SLURM_CONF" > "$D/log/slurmctld.out" 2>&1 & echo $! > "$D/slurmctld.bgpid"
nohup slurmd -D -f "$SLURM_CONF" > "$D/log/slurmd.out" 2>&1 & echo $! > "$D/slurmd.bgpid"
for i in $(seq 100); do sinfo -h -o %T 2>/dev/null | grep -qx idle && break; sleep 0.2; done
sinfo
