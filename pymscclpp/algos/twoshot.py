"""Two-step algorithms for large messages at many ranks (``twoshot_kernels``): the one-shot lanes (channels,
scratch, flags) and prepared launch, read-based kernels that move each byte across a link once."""

from __future__ import annotations

from ..channels import reduce as red
from . import twoshot_kernels as k2
from .algorithm import Call
from .oneshot import AllGather, Broadcast, OneShot, simple_round_bytes


def round_shards(size: int, nranks: int, slots: int) -> list[list[int]]:
    """The shard lengths of every round of a two-step call of ``size`` bytes whose rounds use ``slots`` scratch
    slots (the kernels' ``round_bytes`` and ``shard_bytes``, run on the host)."""
    step = k2.round_bytes.py_func(simple_round_bytes(nranks), nranks, slots)
    out = []
    for base in range(0, size, step):
        rem = min(step, size - base)
        sh = k2.shard_bytes.py_func(rem, nranks)
        out.append([max(0, min(sh, rem - min(s * sh, rem))) for s in range(nranks)])
    return out


class AllReduceTwoShot(OneShot):
    """Reduce-scatter then all-gather in one kernel, read-based (MSCCL++'s ``rsag``): each rank sends and receives
    2N(n-1)/n where the one-shot all-reduce moves N(n-1); bit-identical on every rank."""

    collective = "all_reduce"
    kernels = {"simple": k2.all_reduce_rsag_simple}
    params = ("kind", "op")

    def param_values(self, call: Call) -> tuple:
        return (red.DTYPE_KINDS[call.dtype], red.OPS[call.op])

    def traffic(self, size: int, nranks: int, rank: int, root: int = 0) -> tuple[int, int]:
        """Peers pull the other shards of our staged input and our reduced shard; we pull theirs alike."""
        moved = sum((nranks - 1) * lens[rank] + sum(lens) - lens[rank]
                    for lens in round_shards(size, nranks, nranks - 1))
        return moved, moved


class AllGatherRead(AllGather):
    """All-gather by reads from each peer's staged copy: every byte crosses a link once and lands in ``out``
    directly (the one-shot exchange writes peers' scratch, then each rank copies it out again)."""

    kernels = {"simple": k2.all_gather_read_simple}
    params = ()

    def param_values(self, call: Call) -> tuple:
        return ()

    def traffic(self, size: int, nranks: int, rank: int, root: int = 0) -> tuple[int, int]:
        """Every peer pulls our slot; we pull each of theirs."""
        moved = (nranks - 1) * (size // nranks)
        return moved, moved


class BroadcastScatterGather(Broadcast):
    """Broadcast as scatter + all-gather: the root sends about 2N(n-1)/n, not N(n-1)."""

    kernels = {"simple": k2.broadcast_scatter_gather_simple}

    def traffic(self, size: int, nranks: int, rank: int, root: int = 0) -> tuple[int, int]:
        """Rank r pulls shard r from the root, then every shard it lacks from the rank holding it (the root's own
        from the root): the root sends each shard once and its own to every peer; the others receive it all."""
        sent = received = 0
        for lens in round_shards(size, nranks, nranks):
            if rank == root:
                sent += sum(lens) - lens[root] + (nranks - 1) * lens[root]
            else:
                sent += (nranks - 2) * lens[rank]
                received += sum(lens)
        return sent, received


TWO_STEP = {"all_reduce": AllReduceTwoShot, "all_gather": AllGatherRead, "broadcast": BroadcastScatterGather}
