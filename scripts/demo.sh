#!/usr/bin/env bash
# The main job: set up, then run every collective on 2 ranks (GPUs, or the CUDA simulator), checked.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/mpiexec -n "${NP:-2}" .venv/bin/python examples/collectives_demo.py
