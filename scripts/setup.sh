#!/usr/bin/env bash
# Create .venv (once) and install pymscclpp with its test extras: numba-cuda, mpi4py, an MPI (mpich), NVVM.
# PyTorch (the torch extra, ~5 GB installed, ~1.5 min from this machine's package mirror) comes too under CI or
# with PYMSCCLPP_TORCH=1; without it the torch tests skip.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
extras=test
if [ "${PYMSCCLPP_TORCH:-${CI:+1}}" = 1 ]; then
  extras=test,torch
fi
stamp=.venv/.installed-$extras
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  if [ -n "${CI:-}" ] && [ "$extras" = test,torch ]; then
    # CI has no GPU: torch's CPU build, where the package mirror has one, installs in a third of the time
    .venv/bin/python -m pip install -q "${PYMSCCLPP_CI_TORCH:-torch==2.13.0+cpu}" 2>/dev/null || true
  fi
  .venv/bin/python -m pip install -q -e ".[$extras]"
  touch "$stamp"
fi
