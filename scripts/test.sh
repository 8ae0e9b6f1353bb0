#!/usr/bin/env bash
# The test suite: set up, then run every test on the CUDA simulator (no GPU needed).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYMSCCLPP_BACKEND=${PYMSCCLPP_BACKEND:-sim}
exec .venv/bin/python -m pytest -q tests "$@"
