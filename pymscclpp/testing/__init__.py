"""Property-based tests of collectives, your kernels, algorithms and plans, on a laptop (``docs/testing.md``).

``run_ranks(n, fn, ...)`` and ``ranks(n)`` run ``fn(comm, ...)`` on ``n`` rank processes (the simulator unless
PYMSCCLPP_BACKEND says otherwise) and raise ``RankFailure`` naming the rank, its error or its stack;
``reference`` gives NumPy's answer for every collective, rounded as the library rounds; ``strategies`` draws
calls, inputs and DSL programs for hypothesis; the ``ranks`` pytest fixture keeps pools per rank count.
"""

from __future__ import annotations

from typing import Any

from . import reference
from .failure import RankFailure
from .pool import RankPool, ranks, run_ranks

__all__ = ["RankFailure", "RankPool", "ranks", "reference", "run_ranks", "strategies"]


def __getattr__(name: str) -> Any:
    """``strategies`` loads on first use: it needs hypothesis (the test extra)."""
    if name == "strategies":
        import importlib
        return importlib.import_module(f"{__name__}.strategies")
    raise AttributeError(f"module 'pymscclpp.testing' has no attribute {name!r}")
