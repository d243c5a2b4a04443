#!/bin/sh
# Runs a 2-rank ddp job through a real launcher and checks that both ranks
# joined the same group. Exit 77 (ctest: skipped) when the launcher is missing.
# usage: run.sh torchrun|mpirun|srun|sbatch WORKER
set -u
launcher=$1; worker=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ddp-launch.XXXXXX")
chmod 755 "$work" # munged wants o+x on every directory above its socket
cleanup() {
  case "$launcher" in srun|sbatch) bash "$here/slurm/stop.sh" "$work/slurm" >/dev/null 2>&1 ;; esac
  rm -rf "$work"
}
trap cleanup EXIT
# A signal (ctest's timeout, ^C, scripts/test stopping its waiting tests) runs the EXIT trap too.
trap 'exit 143' TERM HUP
trap 'exit 130' INT
export DDP_TIMEOUT=60s
case "$launcher" in
  torchrun)
    command -v torchrun >/dev/null || { echo "SKIP: torchrun is missing (apt-get install python3-torch)"; exit 77; }
    # Debian's torchrun 1.13 crashes with its default flags; these work (see docs/launching.md).
    torchrun --standalone --nproc_per_node 2 --log_dir "$work/logs" -r 1 -t 1 --no_python "$worker" ok > "$work/out" 2>&1
    ;;
  mpirun)
    command -v mpirun >/dev/null || { echo "SKIP: mpirun is missing (apt-get install openmpi-bin)"; exit 77; }
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      mpirun --oversubscribe -np 2 "$worker" ok > "$work/out" 2>&1
    ;;
  srun)
    command -v slurmctld >/dev/null || { echo "SKIP: slurm-wlm is missing (apt-get install slurm-wlm munge)"; exit 77; }
    [ -r /etc/munge/munge.key ] || { echo "SKIP: no /etc/munge/munge.key"; exit 77; }
    bash "$here/slurm/start.sh" "$work/slurm" > "$work/slurm-start.log" 2>&1 || { cat "$work/slurm-start.log"; exit 1; }
    SLURM_CONF="$work/slurm/slurm.conf" timeout 120 srun -n 2 "$worker" ok > "$work/out" 2>&1
    ;;
  sbatch)
    # The batch recipe of docs/launching.md, submitted as is (sbatch_job.sh); --wait returns the job's exit code.
    command -v slurmctld >/dev/null || { echo "SKIP: slurm-wlm is missing (apt-get install slurm-wlm munge)"; exit 77; }
    [ -r /etc/munge/munge.key ] || { echo "SKIP: no /etc/munge/munge.key"; exit 77; }
    bash "$here/slurm/start.sh" "$work/slurm" > "$work/slurm-start.log" 2>&1 || { cat "$work/slurm-start.log"; exit 1; }
    SLURM_CONF="$work/slurm/slurm.conf" timeout 120 sbatch --wait --quiet -o "$work/out" \
      "$here/sbatch_job.sh" "$worker" ok > "$work/sbatch.log" 2>&1
    ;;
  *) echo "unknown launcher $launcher"; exit 2 ;;
esac
rc=$?
cat "$work/out" 2>/dev/null
[ -s "$work/sbatch.log" ] && cat "$work/sbatch.log"
[ $rc -eq 0 ] || { echo "FAIL: $launcher exited with $rc"; exit 1; }
[ "$(grep -c 'RESULT ok rank=[01] size=2' "$work/out")" -eq 2 ] || { echo "FAIL: expected two ranks of one 2-rank group"; exit 1; }
echo "ok: $launcher"
