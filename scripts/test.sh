#!/usr/bin/env bash
# Install everything and run the whole test suite (what CI runs).
# As root it also starts a real single-node Slurm (scripts/local_slurm.sh) for the
# Slurm end-to-end tests; without it those tests skip with a reason.
set -euo pipefail
cd "$(dirname "$0")/.."
# the test extras (pytest, hypothesis, jupytext, tokenizers, ruff for the lint) plus triton
# for the interpreter kernel tests and wandb for the offline W&B tests; not the dev extra.
SCALELAB_EXTRAS=${SCALELAB_EXTRAS-test,triton,wandb} bash scripts/install.sh
# the lint first, so that it fails fast: the rules are pyproject.toml's [tool.ruff]
.venv/bin/ruff check .
if [ "$(id -u)" = 0 ] && [ -f scripts/local_slurm.sh ] && [ "${SCALELAB_NO_SLURM:-0}" != 1 ]; then
  LOCAL_SLURM_CPUS=${LOCAL_SLURM_CPUS:-4} bash scripts/local_slurm.sh start \
    || echo "WARNING: the local Slurm did not start (see above); the Slurm tests will skip" >&2
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
exec .venv/bin/python -m pytest -n 2 --dist loadgroup "$@"
