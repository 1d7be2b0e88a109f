#!/usr/bin/env bash
# Create .venv and install scalelab from the lock (requirements/lock.txt, made by
# scripts/lock.sh): the same exact versions on every machine, CPU or GPU. Idempotent.
# torch comes from the lock too (2.13.0): on CPU machines pip takes the CPU wheel that lies
# on disk, on GPU machines PyPI's CUDA build of the same release, whose triton the lock pins.
#   SCALELAB_EXTRAS  extras to install (default 'dev': tests, triton, wandb, tokenizers, ruff);
#                    empty = the core only.
#   SCALELAB_VENV    where to put the venv (default .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${SCALELAB_VENV:-.venv}
LOCK=requirements/lock.txt
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
pin() { grep -E "^$1==" "$LOCK"; }
# the installer and the build backend first, locked like everything else
"$VENV/bin/python" -m pip install -q -c "$LOCK" "$(pin pip)" "$(pin setuptools)"
TORCH=$(pin torch)
"$VENV/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '${TORCH#torch==}')" \
  2>/dev/null || "$VENV/bin/pip" install -q -c "$LOCK" "$TORCH"
EXTRAS=${SCALELAB_EXTRAS-dev}
# the optimizers first: scalelab depends on scalelab-optim, built from optim/ (not on PyPI)
"$VENV/bin/pip" install -q -c "$LOCK" --no-build-isolation -e ./optim
"$VENV/bin/pip" install -q -c "$LOCK" --no-build-isolation -e ".${EXTRAS:+[$EXTRAS]}"
