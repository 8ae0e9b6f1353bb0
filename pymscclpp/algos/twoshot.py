"""Two-step algorithms for large messages at many ranks (``twoshot_kernels``): the one-shot lanes (channels,
scratch, flags) and prepared launch, read-based kernels that move each byte across a link once."""

from __future__ import annotations

from ..channels import reduce as red
from . import twoshot_kernels as k2
from .algorithm import Call
from .oneshot import AllGather, Broadcast, OneShot


class AllReduceTwoShot(OneShot):
    """Reduce-scatter then all-gather in one kernel, read-based (MSCCL++'s ``rsag``): each rank sends and receives
    2N(n-1)/n where the one-shot all-reduce moves N(n-1); bit-identical on every rank."""

    collective = "all_reduce"
    kernels = {"simple": k2.all_reduce_rsag_simple}
    params = ("kind", "op")

    def param_values(self, call: Call) -> tuple:
        return (red.DTYPE_KINDS[call.dtype], red.OPS[call.op])


class AllGatherRead(AllGather):
    """All-gather by reads from each peer's staged copy: every byte crosses a link once and lands in ``out``
    directly (the one-shot exchange writes peers' scratch, then each rank copies it out again)."""

    kernels = {"simple": k2.all_gather_read_simple}
    params = ()

    def param_values(self, call: Call) -> tuple:
        return ()


class BroadcastScatterGather(Broadcast):
    """Broadcast as scatter + all-gather: the root sends about 2N(n-1)/n, not N(n-1)."""

    kernels = {"simple": k2.broadcast_scatter_gather_simple}


TWO_STEP = {"all_reduce": AllReduceTwoShot, "all_gather": AllGatherRead, "broadcast": BroadcastScatterGather}
