"""Rank functions for the traffic tests (the rank pools' ``fn(comm, state, ...)`` form)."""

from __future__ import annotations

from pymscclpp.bench.traffic import measured_call as _measured


def measured_call(comm, state, collective: str, algo: str, count: int, root: int = 0, zero_copy: bool = False) -> dict:
    """``pymscclpp.bench.traffic.measured_call`` in a rank pool."""
    return _measured(comm, collective, algo, count, root, zero_copy)
