"""A drawn collective call: which collective, how many ranks, elements, dtype, op and root; and running it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..channels.reduce import DTYPE_KINDS, OPS, PAIRWISE_OPS
from ..runtime.collectives import COLLECTIVES, REDUCING  # noqa: F401 (re-exported for strategies)

DTYPES = tuple(DTYPE_KINDS)
REDUCE_OPS = tuple(op for op in OPS if op in PAIRWISE_OPS)  # every algorithm serves these; avg: not plans


def np_dtype(name: str) -> np.dtype:
    """The NumPy dtype of a dtype name (``bfloat16`` from ml_dtypes)."""
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


@dataclass(frozen=True)
class CollectiveCall:
    """``collective`` on ``nranks`` ranks of ``count`` elements of ``dtype`` as NCCL counts them (all_gather: the
    send buffer; reduce_scatter: the receive buffer; all_to_all: one slot); ``op`` for reducing collectives
    (else None); ``root`` for broadcast (else 0)."""

    collective: str
    nranks: int
    count: int
    dtype: str
    op: str | None = None
    root: int = 0

    @property
    def in_count(self) -> int:
        """Elements of each rank's input."""
        return self.count * (self.nranks if self.collective in ("reduce_scatter", "all_to_all") else 1)

    @property
    def out_count(self) -> int:
        """Elements of each rank's output."""
        return self.count * (self.nranks if self.collective in ("all_gather", "all_to_all") else 1)

    def run(self, comm, x: np.ndarray, algo: str | None = None) -> np.ndarray:
        """Make the call on ``comm`` with this rank's input ``x`` (out of place); this rank's output."""
        from numba import cuda
        send = cuda.to_device(np.ascontiguousarray(x))
        recv = cuda.to_device(np.zeros(self.out_count, x.dtype))
        extra = {"op": self.op} if self.collective in REDUCING else {"root": self.root} \
            if self.collective == "broadcast" else {}
        getattr(comm, self.collective)(send, recv, algo=algo, **extra)
        cuda.synchronize()
        comm.check_device_errors()
        return recv.copy_to_host()
