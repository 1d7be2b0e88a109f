#!/usr/bin/env bash
# Refresh requirements/lock.txt: exact versions of every dependency of every extra,
# resolved from pyproject.toml for CPython 3.11 on x86_64 Linux (manylinux_2_28).
# torch is held at the version CI has on disk (TORCH, default 2.13.0); the resolution uses
# the CUDA build's metadata, so triton is pinned to the release that torch build requires
# and the same lock installs on CPU and GPU machines (scripts/install.sh uses it as pip
# constraints: nvidia-* pins only matter where the CUDA build is installed).
# Needs uv; a private copy is installed into .venv-lock when it is not on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH=${TORCH:-2.13.0}
if command -v uv >/dev/null 2>&1; then UV=uv; else
  [ -x .venv-lock/bin/uv ] || { python3 -m venv .venv-lock && .venv-lock/bin/pip install -q uv; }
  UV=.venv-lock/bin/uv
fi
printf '# torch is held at the release CI has on disk (scripts/lock.sh writes this file).\ntorch==%s\n' \
  "$TORCH" > requirements/torch.in
"$UV" pip compile pyproject.toml requirements/tools.in --all-extras --python-version 3.11 \
  --python-platform x86_64-manylinux_2_28 --constraint requirements/torch.in --no-emit-package scalelab-optim --no-header --quiet \
  --output-file requirements/lock.body
{
  echo "# Exact versions for every extra of scalelab, made by scripts/lock.sh on $(date -u +%F);"
  echo "# scripts/install.sh installs with 'pip install -c requirements/lock.txt'. Do not edit."
  cat requirements/lock.body
} > requirements/lock.txt
rm -f requirements/lock.body
echo "requirements/lock.txt: $(grep -c '==' requirements/lock.txt) pins (torch $TORCH, $(grep '^triton==' requirements/lock.txt))"
