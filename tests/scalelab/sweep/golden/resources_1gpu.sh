#!/bin/bash

# Parameters
#SBATCH --array=0-1%2
#SBATCH --cpus-per-task=4
#SBATCH --gpus-per-node=1
#SBATCH --job-name=scalelab-sweep
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --open-mode=append
#SBATCH --output=<SWEEP>/jobs/%A_%a/%A_%a_0_log.out
#SBATCH --partition=gpu
#SBATCH --signal=USR2@60
#SBATCH --time=15
#SBATCH --wckey=submitit

# setup
module load cuda/12.4
source /opt/venvs/lab/bin/activate
export NCCL_DEBUG=WARN
export OMP_NUM_THREADS=4
export NCCL_SOCKET_IFNAME='^lo,docker'
export PYTHONPATH=<SWEEP>/code/<CODE>${PYTHONPATH:+:$PYTHONPATH}
export PYTHONSAFEPATH=1
export SCALELAB_CODE=<CODE>

# command
export SUBMITIT_EXECUTOR=slurm
srun --unbuffered --output <SWEEP>/jobs/%A_%a/%A_%a_%t_log.out <PYTHON> -u -m submitit.core._submit <SWEEP>/jobs/%j
