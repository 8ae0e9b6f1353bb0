"""Test setup: the simulator backend unless told otherwise, and tests/ importable by rank processes."""

import os
import sys

os.environ.setdefault("PYMSCCLPP_BACKEND", "sim")
if os.environ["PYMSCCLPP_BACKEND"] == "sim":
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"  # test modules may import numba.cuda first
sys.path.insert(0, os.path.dirname(__file__))
