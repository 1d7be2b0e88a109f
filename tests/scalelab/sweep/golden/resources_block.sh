#!/bin/bash

# Parameters
#SBATCH --cpus-per-task=4
#SBATCH --gpus-per-node=4
#SBATCH --job-name=scalelab-sweep
#SBATCH --mem=512G
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --open-mode=append
#SBATCH --output=<SWEEP>/jobs/%j/%j_0_log.out
#SBATCH --partition=gpu
#SBATCH --signal=USR2@60
#SBATCH --time=60
#SBATCH --wckey=submitit

# setup
module load cuda/12.6
export NCCL_DEBUG=WARN
export OMP_NUM_THREADS=4
export NCCL_SOCKET_IFNAME='^lo,docker'
export NCCL_IB_HCA=mlx5
export PYTHONPATH=<SWEEP>/code/<CODE>${PYTHONPATH:+:$PYTHONPATH}
export PYTHONSAFEPATH=1
export SCALELAB_CODE=<CODE>

# command
export SUBMITIT_EXECUTOR=slurm
srun --unbuffered --output <SWEEP>/jobs/%j/%j_%t_log.out <PYTHON> -u -m submitit.core._submit <SWEEP>/jobs/%j
