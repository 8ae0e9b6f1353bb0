#!/usr/bin/env bash
# Create .venv (once) and install pymscclpp with its test extras: numba-cuda, mpi4py, an MPI (mpich), NVVM, mypy.
# Under CI also Debian's python3-pyverbs and rdma-core (apt), for the IB transport's tests.
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
if [ -n "${CI:-}" ] && command -v apt-get >/dev/null && ! dpkg -s python3-pyverbs rdma-core >/dev/null 2>&1; then
  # the IB transport's tests run against the real pyverbs (tests/test_pyverbs.py); only where apt is missing do
  # they skip. apt-get needs root (or sudo without a password)
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo -n"
  $sudo apt-get update -qq && $sudo apt-get install -y -qq python3-pyverbs rdma-core >/dev/null
fi
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
