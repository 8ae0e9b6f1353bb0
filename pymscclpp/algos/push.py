"""Zero-copy algorithms by writes: each rank writes what peers need straight into their mapped receive buffers
(``allgather_kernels`` pushing, ``pair_kernels``, ``twoshot_kernels.broadcast_push``), where the other zero-copy
kernels read peers' send buffers. A write over NVLink is posted while a read waits a round trip (on one GPU under
MPS they measured no faster, so the defaults keep the pulls: docs/performance.md). Not registered or captured, each
runs its staged parent's kernel.
"""

from __future__ import annotations

from ..runtime.launch import Launch
from . import allgather_kernels, pair_kernels, twoshot_kernels
from .algorithm import OUT_OF_PLACE, Call, CallBuffer, Constraint
from .oneshot import AllGather
from .shard_traffic import call_shards
from .twoshot import AllReduceTwoShot, BroadcastScatterGather, ReduceScatterRead
from .zero_copy import kernel_argtypes


class Pushing:
    """Mixin before a ``ZeroCopy`` family: its window is the call's receive buffer (``recv_bytes`` of it on every
    rank), and the kernel takes the peers' mapped receive buffers as ``outs``, ours as ``out`` and the call's send
    buffer as ``inp``."""

    pushes = True
    in_place_moves_bytes = False  # a peer writes into our window at its own place, whatever our input
    zero_copy_ints: tuple = ()  # the kernel's per-call integers after ``nranks``

    def recv_bytes(self, call: Call) -> int:
        """Bytes of the receive buffer a call's peers write into."""
        return call.peer_bytes

    def send_bytes(self, call: Call) -> int:
        """Bytes of the send buffer a call's kernel reads."""
        return call.peer_bytes

    def window_buffers(self, call: Call) -> tuple[tuple[CallBuffer, int], ...] | None:
        return ((call.recv, self.recv_bytes(call)),)

    def zero_copy_args(self, windows: tuple) -> dict:
        (got,) = windows
        base = self.kernel_launch.values
        args = {"chans": base["chans"], "call_check": base["call_check"], "fingerprint": 0, "outs": got.handles,
                "inp": base["inp"], "out": got.local, "nbytes": 0, "rank": self.rank, "nranks": self.nranks}
        return {**args, **dict.fromkeys(self.zero_copy_ints, 0)}

    def bind_zero_copy(self, launch: Launch, call: Call) -> None:
        """The input is any buffer: this call's (and the family's own per-call integers)."""
        super().bind_zero_copy(launch, call)
        launch.set_buffer("inp", call.send.ptr, self.send_bytes(call), call.send.array)


class AllGatherPush(Pushing, AllGather):
    """All-gather writing our slot into every peer's mapped output (the staged call: the one-shot exchange)."""

    zero_copy_kernel = allgather_kernels.exchange_push_zero_copy_simple
    zero_copy_ints = ("send_stride",)

    def recv_bytes(self, call: Call) -> int:
        return call.peer_bytes * self.nranks

    def send_bytes(self, call: Call) -> int:
        return call.peer_bytes * (self.nranks if self.send_all else 1)


class AllToAllPush(AllGatherPush):
    """All-to-all writing send slot p into rank p's mapped output at our slot; out of place only (in place, a
    rank would overwrite the slot a peer is still sending from)."""

    collective = "all_to_all"
    send_all = True
    buffer_mode = OUT_OF_PLACE


class ReduceScatterPush(Pushing, ReduceScatterRead):
    """Reduce-scatter of two ranks by writes (``pair_kernels``); out of place only (the peer's output would be
    the slot of its input it still reduces)."""

    zero_copy_kernel = pair_kernels.reduce_scatter_push_zero_copy_simple
    zero_copy_ints = ("kind", "op")
    buffer_mode = OUT_OF_PLACE
    constraint = Constraint(world_size=2, hosts=1)

    def send_bytes(self, call: Call) -> int:
        return call.peer_bytes * self.nranks

    @classmethod
    def zero_copy_argtypes(cls, nranks: int) -> tuple:
        return kernel_argtypes(nranks, 1, 5)


class AllReducePush(Pushing, AllReduceTwoShot):
    """All-reduce of two ranks by writes (``pair_kernels``); out of place only (the peer's output would be its
    input)."""

    zero_copy_kernel = pair_kernels.all_reduce_push_zero_copy_simple
    zero_copy_ints = ("kind", "op")
    buffer_mode = OUT_OF_PLACE
    constraint = Constraint(world_size=2, hosts=1)

    @classmethod
    def zero_copy_argtypes(cls, nranks: int) -> tuple:
        return kernel_argtypes(nranks, 1, 5)


class BroadcastPush(BroadcastScatterGather):
    """Broadcast by writes into the other ranks' mapped outputs (``twoshot_kernels.broadcast_push``): its window is
    every rank's output (the root writes from its own input)."""

    zero_copy_kernel = twoshot_kernels.broadcast_push_zero_copy_simple
    pushes = True

    def window_buffers(self, call: Call) -> tuple[tuple[CallBuffer, int], ...] | None:
        return ((call.recv, call.peer_bytes),)

    def zero_copy_args(self, windows: tuple) -> dict:
        """The pulling broadcast's arguments on the one window, less the peers' inputs, which this kernel reads
        none of."""
        return {k: v for k, v in super().zero_copy_args(windows).items() if k != "ins"}

    @classmethod
    def zero_copy_argtypes(cls, nranks: int) -> tuple:
        return kernel_argtypes(nranks, 1, 4)

    def zero_copy_traffic(self, message_bytes: int, nranks: int, rank: int, root: int = 0) -> tuple[int, int]:
        """The root sends piece i of n - 1 to the i-th rank after it, which sends it on to the n - 2 others."""
        pieces = call_shards(message_bytes, nranks - 1)
        if rank == root:
            return sum(pieces), 0
        return (nranks - 2) * pieces[(rank - root - 1) % nranks], sum(pieces)


PUSH = {"all_gather": AllGatherPush, "all_to_all": AllToAllPush, "reduce_scatter": ReduceScatterPush,
        "all_reduce": AllReducePush, "broadcast": BroadcastPush}
