"""What each collective must compute: outputs from inputs, with numpy."""

from __future__ import annotations

from typing import Sequence

import numpy as np

CHECKED = ("allreduce", "allgather", "reducescatter", "alltoall")


def expected_outputs(collective: str, inputs: Sequence[np.ndarray]) -> list[np.ndarray] | None:
    """Each rank's output for ``inputs`` (one 1-D array per rank), or None for collectives without a definition."""
    n = len(inputs)
    if collective == "allgather":
        gathered = np.concatenate(inputs)
        return [gathered.copy() for _ in range(n)]
    if collective == "alltoall":
        parts = [np.split(x, n) for x in inputs]
        return [np.concatenate([parts[j][r] for j in range(n)]) for r in range(n)]
    if collective in ("allreduce", "reducescatter"):
        total = inputs[0].copy()
        for x in inputs[1:]:
            total = total + x
        if collective == "allreduce":
            return [total.copy() for _ in range(n)]
        return [part.copy() for part in np.split(total, n)]
    return None
