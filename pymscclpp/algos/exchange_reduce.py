"""Reduce on one host as reduce-scatter then gather (``ShardedReduce``): every rank reduces its shard of the buffer
reading every rank's (the reduce-scatter ``read`` algorithm, zero-copy on a registered buffer), then one exchange
launch gathers the shards into the root. A rank moves about N(n - 1)/n each way, plus its shard to the root, where
the direct reduce (``exchange_kernels``) has the root receive (n - 1)N. Two ranks, small calls and buffers that do
not split into 16-byte shards go direct.
"""

from __future__ import annotations

from ..runtime.backend import IS_SIM
from .algorithm import Algorithm, Call
from .exchange import Exchange, layout, rooted_descriptors
from .verbs import Staging, staging

SHARDED_FROM = 0 if IS_SIM else 1 << 20  # bytes: from here two launches beat one (the simulator: every call)
SCATTER_REDUCE = "read"  # the reduce-scatter algorithm it runs (collection.TWO_STEP_NAMES)


def sharded(nbytes: int, nranks: int) -> bool:
    """Whether a reduce of ``nbytes`` on ``nranks`` ranks goes as reduce-scatter then gather."""
    return nranks >= 3 and nbytes >= max(SHARDED_FROM, 1) and nbytes % (16 * nranks) == 0


class ShardedReduce(Exchange):
    """``reduce`` as reduce-scatter then gather where ``sharded``, else the exchange's direct reduce."""

    def __init__(self):
        super().__init__("reduce")
        self.comm = None  # the communicator (a proxy), from set-up
        self.scatter: Algorithm | None = None  # the reduce-scatter it runs (from 3 ranks), from its first use
        self.staging: Staging | None = None

    def setup(self, comm) -> None:
        super().setup(comm)
        self.comm = comm

    def launch(self, call: Call) -> None:
        if not sharded(call.message_bytes, self.lanes.size):
            super().launch(call)
            return
        if self.scatter is None:  # at the first sharded reduce, which every rank makes alike (a collective): the
            # exchange's set-up, which a send/recv may start, makes no reduce-scatter lanes for a reduce never made
            self.scatter = self.comm.algorithms.get("reduce_scatter", SCATTER_REDUCE)
            self.staging = staging(self.comm)
        n, shard = self.lanes.size, call.message_bytes // self.lanes.size
        shards = self.staging.get("shard", shard)
        scatter = Call(collective="reduce_scatter", sendbuf=None, recvbuf=None, send=call.send, recv=shards,
                       peer_bytes=shard, message_bytes=call.message_bytes, dtype=call.dtype, op=call.op, root=0,
                       stream=call.stream, in_place=False)
        self.scatter.launch(scatter)
        root, rank = call.root, self.lanes.rank
        sends = {root: (0, shard)}  # at the root: its own shard, copied
        recvs = {p: (p * shard, shard) for p in range(n)} if rank == root else {}
        checks = rooted_descriptors(n, rank, "reduce", shard, call.dtype, root, call.op)
        gather = self.lanes.launch(Call(collective="gather", sendbuf=None, recvbuf=None, send=shards,
                                        recv=call.recv, peer_bytes=shard, message_bytes=call.message_bytes,
                                        dtype=call.dtype, op="sum", root=root, stream=call.stream, in_place=False,
                                        layout=layout(n, sends, recvs, checks)))
        self.last_kernel = f"{self.scatter.last_kernel} + {gather.name}"

    def traffic(self, size: int, nranks: int, rank: int, root: int = 0) -> tuple[int, int]:
        """Sharded: every rank reads its shard from every peer (and they read theirs from it), then sends the
        root its reduced shard; else the direct reduce's."""
        if not sharded(size, nranks):
            return super().traffic(size, nranks, rank, root)
        moved = (nranks - 1) * (size // nranks)
        return (moved, 2 * moved) if rank == root else (moved + size // nranks, moved)

