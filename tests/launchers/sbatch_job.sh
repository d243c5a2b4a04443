#!/bin/bash
# The sbatch recipe of docs/launching.md: one SLURM task per rank, so ddp takes its rank
# from SLURM_PROCID and SLURM_NTASKS, the master from the first host of the
# allocation and the store's port from the job id (20000 + id mod 10000).
# Usage: sbatch [--nodes N --ntasks-per-node K] sbatch_job.sh ./train [args...]
# tests/launchers/run.sh sbatch submits exactly this file.
#SBATCH --job-name=ddp
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --time=00:10:00
set -euo pipefail
# One token for the whole job; srun passes the environment to every task.
export DDP_TOKEN=${DDP_TOKEN:-$(openssl rand -hex 16)}
# Every wait (rendezvous, collectives) gives up after this, naming the missing rank.
export DDP_TIMEOUT=${DDP_TIMEOUT:-60s}
# Choose the store's port yourself when the job-id port may be taken:
# export MASTER_PORT=29500
exec srun "$@"
