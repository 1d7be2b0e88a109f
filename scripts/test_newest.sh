#!/usr/bin/env bash
# The canary job: the kernel and optimizer tests (optim/tests, plus the training registry)
# against the NEWEST releases of triton and torch that pyproject.toml's ranges allow, in
# their own venv (.venv-newest: a copy of the locked .venv when there is one, with only
# torch and triton upgraded). A new release that breaks us shows up
# here as a named failure, while main stays green on the locked versions.
#   torch: PyPI has no CPU build for x86_64 Linux; the newest release there is a CUDA build
#   of several GB. On a machine without a GPU the job keeps the locked torch and says so,
#   unless SCALELAB_NEWEST_TORCH=1 (on a GPU machine it is always taken).
# Exit code: 0 when the tests pass; 1 when they fail; 3 when the venv could not be built
# (e.g. no network). .ci/run reports it and goes on.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-newest
LOCK=requirements/lock.txt
PY=${PYTHON:-python3}
log() { echo "[newest] $*"; }
newest() {  # the newest release of $1 on the configured indexes
  "$VENV/bin/python" -m pip index versions "$1" 2>/dev/null | sed -n 's/^[^ ]* (\(.*\))$/\1/p' | head -1
}
rm -rf "$VENV"
if [ -x .venv/bin/python ]; then
  # a copy of the locked venv (scripts/install.sh made it): only torch and triton move below
  # hard links: instant, no space; pip replaces files by unlink + create, never in place
  cp -al .venv "$VENV" 2>/dev/null || cp -a .venv "$VENV" || exit 3
else
  "$PY" -m venv "$VENV" || exit 3
  "$VENV/bin/python" -m pip install -q -c "$LOCK" "$(grep -E '^pip==' "$LOCK")" setuptools >/dev/null 2>&1
  "$VENV/bin/python" -m pip install -q -c "$LOCK" --no-build-isolation -e ".[test,triton]" \
    > "$VENV/install.log" 2>&1 || { log "could not build the venv (see $VENV/install.log)"; exit 3; }
fi
locked_torch=$(grep -E '^torch==' "$LOCK" | cut -d= -f3)
newest_torch=$(newest torch)
if [ "${SCALELAB_NEWEST_TORCH:-0}" = 1 ] || command -v nvidia-smi >/dev/null 2>&1; then
  torch_req="torch>=${locked_torch%%.*}"  # newest allowed by pyproject.toml
  torch_note="newest"
else
  torch_req="torch==$locked_torch"
  torch_note="locked; newest allowed is ${newest_torch:-unknown}, a CUDA-only build on PyPI: SCALELAB_NEWEST_TORCH=1 takes it"
fi
if ! "$VENV/bin/python" -m pip install -q --upgrade "$torch_req" "triton>=3.7" \
     > "$VENV/install.log" 2>&1; then
  log "could not build the venv (see $VENV/install.log):"; tail -3 "$VENV/install.log"; exit 3
fi
versions=$("$VENV/bin/python" -c "import torch, triton; print(f'torch {torch.__version__}, triton {triton.__version__}')")
log "testing against $versions (torch: $torch_note)"
OMP_NUM_THREADS=1 "$VENV/bin/python" -m pytest -q -p no:cacheprovider -n 2 \
  optim/tests tests/scalelab/test_optim_registry.py > "$VENV/pytest.log" 2>&1
rc=$?
if [ "$rc" = 0 ]; then
  log "PASSED on $versions: $(tail -1 "$VENV/pytest.log")"
else
  log "FAILED on $versions:"
  grep -E '^(FAILED|ERROR) ' "$VENV/pytest.log" | sed 's/^/[newest]   /'
  log "$(tail -1 "$VENV/pytest.log") (full log: $VENV/pytest.log)"
  rc=1
fi
exit "$rc"
