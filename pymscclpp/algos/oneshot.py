"""One-shot algorithms: every rank exchanges its data with every peer in one hop (LL16 packets) or in rounds of
puts and signals (simple), through channels, scratch and flags shared by every one-shot algorithm of a protocol
and grid on the communicator, built once and patched per call. Every call's kernel first compares the ranks'
call fingerprints (``callcheck``).
"""

from __future__ import annotations

import numpy as np
from numba.core import types

from ..channels import reduce as red
from ..runtime import handle_types as ht
from ..runtime.backend import IS_SIM
from ..runtime.launch import Launch
from ..runtime.memory import alloc
from .algorithm import Call, CallBuffer, Constraint, device_buffer
from ..callcheck.area import callcheck, handle_type
from . import allgather_kernels, broadcast_kernels, reduce_kernels, twoshot_kernels
from .grid import blocks_for
from .prepared import PreparedKernel
from .shard_traffic import call_shards, scatter_gather_traffic
from .zero_copy import ZeroCopy, kernel_argtypes

PACKET_MAX = 1 << 20  # the largest message a packet algorithm serves


def simple_round_bytes(nranks: int) -> int:
    """Bytes per slot and round of the simple protocol: 32 MB, less from 5 ranks up so scratch stays <= 256 MB."""
    if IS_SIM:
        return 1 << 16
    return max(1 << 20, min(32 << 20, (128 << 20) // nranks)) // 16 * 16


def reduce_output(call: Call) -> CallBuffer:
    """A call's output on this rank: a reduce's non-root has none (the kernels never write it there), its send
    buffer stands in."""
    return call.recv if call.recv.ptr is not None else call.send


class Lanes:
    """What the one-shot algorithms of one protocol and grid share on a communicator: a MemoryChannel to every
    peer with one semaphore per block, a scratch of two halves of ``nranks`` slots of ``slot_bytes``, and one flag
    per block. Sharing is safe because a communicator's calls run one after another (as with NCCL), and every
    block's flag advances by one per launch (packets) or round (simple) whichever algorithm runs, and every one of
    them lays scratch out alike (halves of ``nranks`` slots of ``slot_bytes``), so a half is never reused by the very
    next launch."""

    def __init__(self, comm, blocks: int, slot_bytes: int):
        from numba import cuda
        self.blocks, self.slot_bytes = blocks, slot_bytes
        self.scratch = alloc(2 * comm.size * slot_bytes)
        peers = [p for p in range(comm.size) if p != comm.rank]
        chans = comm.memory_channels(peers, src=self.scratch, inbox=self.scratch, semaphores=blocks)
        self.handles = tuple(chans[p].device_handle() for p in peers)
        self.view = chans[peers[0]].inbox  # the scratch as the uint8 array kernels take
        self.flags = cuda.to_device(np.zeros(blocks, np.uint32))


def lanes_slot_bytes(comm, protocol: str) -> int:
    """Bytes of one scratch slot of ``comm``'s ``protocol`` lanes: a packet message's packets, or a simple round."""
    return 2 * PACKET_MAX if protocol == "packet" else simple_round_bytes(comm.size)


def lanes(comm, protocol: str, blocks: int) -> Lanes:
    """The communicator's shared lanes for ``protocol`` on ``blocks`` blocks (built collectively on first use)."""
    slot = lanes_slot_bytes(comm, protocol)
    return comm.extension(f"oneshot/{protocol}/{blocks}", lambda c: Lanes(c, blocks, slot))


class OneShot(PreparedKernel):
    """A one-shot collective on the communicator's lanes of its protocol and grid. ``kernels`` maps each protocol
    to its entry kernel, taking ``(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes,
    rank, nranks, *params)`` (``call_check``, ``fingerprint``: the call check's handle and the call's
    fingerprint); ``send_all``/``recv_all``: the send / receive buffer holds ``nranks`` slots."""

    kernels: dict = {}
    send_all = recv_all = False
    constraint = Constraint(hosts=1)
    params: tuple = ()  # the kernel's per-call integers after ``nranks``

    def setup(self, comm) -> None:
        self.check = callcheck(comm)  # first: one per communicator, whichever one-shot algorithm a rank sets up
        self.blocks = blocks_for(comm, self.blocks)
        self.lanes = shared = lanes(comm, self.protocol, self.blocks)
        self.rank, self.nranks = comm.rank, comm.size
        v = shared.view
        args = {"chans": shared.handles, "call_check": self.check.handle, "fingerprint": 0, "inp": v, "out": v,
                "scratch": v, "flags": shared.flags, "nbytes": 0, "slot_bytes": shared.slot_bytes, "rank": comm.rank,
                "nranks": comm.size}
        args.update(dict.fromkeys(self.params, 0))
        self.prepare(self.kernels[self.protocol], args, self.argtypes(comm.size))

    @classmethod
    def argtypes(cls, nranks: int) -> tuple:
        """The numba types of the entry kernels' arguments on ``nranks`` ranks, in ``setup``'s order (the
        launch checks its values have them)."""
        i64 = types.int64
        named = {"chans": types.UniTuple(ht.memory_channel(), nranks - 1), "call_check": handle_type(nranks - 1),
                 "fingerprint": i64, "inp": ht.BYTES, "out": ht.BYTES, "scratch": ht.BYTES, "flags": ht.U32,
                 "nbytes": i64, "slot_bytes": i64, "rank": i64, "nranks": i64, **dict.fromkeys(cls.params, i64)}
        return tuple(named.values())

    def param_values(self, call: Call) -> tuple:
        """The values of ``params`` for ``call``."""
        return ()

    def bind(self, launch: Launch, call: Call) -> None:
        """The call's buffers (a slot each, or ``nranks`` slots; ``output``), bytes per slot, fingerprint and
        params."""
        nbytes, nranks, out = call.peer_bytes, self.nranks, self.output(call)
        launch.set_buffer("inp", call.send.ptr, nbytes * nranks if self.send_all else nbytes, call.send.array)
        launch.set_buffer("out", out.ptr, nbytes * nranks if self.recv_all else nbytes, out.array)
        launch.set_int("nbytes", nbytes)
        launch.set_int("fingerprint", self.check.fingerprint(call))
        for name, value in zip(self.params, self.param_values(call)):
            launch.set_int(name, value)

    def output(self, call: Call) -> CallBuffer:
        """Where this rank's kernel writes its result: ``reduce_output``."""
        return reduce_output(call)

    def wire_bytes(self, nbytes: int) -> int:
        """Bytes a channel carries for ``nbytes`` of data: LL16 packets carry 8 data bytes in 16."""
        return -(-nbytes // 8) * 16 if self.protocol == "packet" else nbytes

    def slot_nbytes(self, message_bytes: int, nranks: int) -> int:
        """What one rank sends one peer (``Call.peer_bytes``) in a call of ``message_bytes``: a slot of it when the
        collective counts ``nranks`` slots (all-gather's output, reduce-scatter's and all-to-all's input)."""
        return message_bytes // nranks if self.send_all or self.recv_all else message_bytes

    def traffic(self, message_bytes: int, nranks: int, rank: int, root: int = 0) -> tuple[int, int]:
        """Every rank pushes a slot to every peer (broadcast overrides)."""
        moved = (nranks - 1) * self.wire_bytes(self.slot_nbytes(message_bytes, nranks))
        return moved, moved


class AllReduce(OneShot):
    """Every rank reduces all ranks' data in rank order (bit-identical results): ``packet`` is one LL16 hop
    (small messages), ``simple`` puts plus one signal per block and peer, in rounds (large messages)."""

    collective = "all_reduce"
    kernels = {"packet": reduce_kernels.reduce_ll, "simple": reduce_kernels.reduce_simple}
    params = ("send_stride", "kind", "op")
    ops = frozenset(red.OPS)  # avg too: every rank's slot reduced in one pass, then divided

    def param_values(self, call: Call) -> tuple:
        # the send stride: every peer gets the whole buffer (all-reduce) or its own slot (reduce-scatter)
        return (call.peer_bytes if self.send_all else 0, red.DTYPE_KINDS[call.dtype], red.OPS[call.op])


class Reduce(AllReduce):
    """A small reduce as the one-shot all-reduce whose non-roots reduce into the communicator's sink, a buffer
    nothing reads (packet scratch would not do: a later launch could take their bytes for its packets' flags), so
    only the root's output is written: where one meeting per launch is the cost, it costs what the all-reduce of its
    bytes does."""

    collective = "reduce"

    def setup(self, comm) -> None:
        from numba import cuda
        super().setup(comm)
        self.sink = comm.extension("oneshot/reduce-sink",
                                   lambda c: device_buffer(cuda.device_array(PACKET_MAX, np.uint8)))

    def output(self, call: Call) -> CallBuffer:
        """The root's output; a non-root's is the sink."""
        return reduce_output(call) if self.rank == call.root else self.sink

    def close(self) -> None:
        """Drop the sink (the communicator drops its own reference as it closes)."""
        super().close()
        self.sink = None


class ReduceScatter(AllReduce):
    """The all-reduce kernel with slot p of ``send`` going to rank p: rank r gets every rank's slot r reduced."""

    collective = "reduce_scatter"
    send_all = True


class AllGather(ZeroCopy, OneShot):
    """All-pairs exchange: ``recv`` slot r is rank r's ``send``; zero-copy (simple protocol), each rank reads
    every peer's mapped send buffer into its slot."""

    collective = "all_gather"
    kernels = {"packet": allgather_kernels.exchange_ll, "simple": allgather_kernels.exchange_simple}
    zero_copy_kernel = allgather_kernels.exchange_zero_copy_simple
    recv_all = True
    params = ("send_stride",)
    in_place_moves_bytes = True  # in place, peer p's bytes are its slot p of its receive buffer

    def param_values(self, call: Call) -> tuple:
        return (call.peer_bytes if self.send_all else 0,)

    def window_buffers(self, call: Call) -> tuple[tuple[CallBuffer, int], ...] | None:
        """Peers read our send buffer; in place, our receive buffer, which holds it (its start is where the
        registration begins on every rank, where our slot begins only on rank 0)."""
        if call.in_place:
            return ((call.recv, call.peer_bytes * self.nranks),)
        return ((call.send, call.peer_bytes * (self.nranks if self.send_all else 1)),)

    def zero_copy_args(self, windows: tuple) -> dict:
        (sent,) = windows
        base = self.kernel_launch.values
        return {"chans": base["chans"], "call_check": base["call_check"], "fingerprint": 0, "ins": sent.handles,
                "inp": sent.local, "out": base["out"], "nbytes": 0, "rank": self.rank, "nranks": self.nranks,
                "send_stride": 0}

    @classmethod
    def zero_copy_argtypes(cls, nranks: int) -> tuple:
        return kernel_argtypes(nranks, 1, 4)

    def bind_zero_copy(self, launch: Launch, call: Call) -> None:
        """The output is any buffer: this call's; the input this call's (in place: our slot of the output)."""
        launch.set_buffer("out", call.recv.ptr, call.peer_bytes * self.nranks, call.recv.array)
        launch.set_buffer("inp", call.send.ptr, call.peer_bytes * (self.nranks if self.send_all else 1),
                          call.send.array)
        launch.set_int("send_stride", call.peer_bytes if self.send_all else 0)


class AllToAll(AllGather):
    """The all-gather exchange with a send slot per peer: ``send`` slot j goes to rank j's ``recv`` slot ``rank``;
    zero-copy out of place only (in place, a rank would overwrite slots peers still read)."""

    collective = "all_to_all"
    send_all = True

    def window_buffers(self, call: Call) -> tuple[tuple[CallBuffer, int], ...] | None:
        return None if call.in_place else super().window_buffers(call)


class Broadcast(ZeroCopy, OneShot):
    """Root-to-all through slot 0 of each scratch half, with credits from peers to the root; zero-copy (simple
    protocol) as scatter + all-gather: each non-root reads its shard of the root's mapped input and writes it into
    the other non-roots' mapped outputs."""

    collective = "broadcast"
    kernels = {"packet": broadcast_kernels.broadcast_ll, "simple": broadcast_kernels.broadcast_simple}
    zero_copy_kernel = twoshot_kernels.broadcast_zero_copy_simple
    params = ("root",)

    def traffic(self, message_bytes: int, nranks: int, rank: int, root: int = 0) -> tuple[int, int]:
        """The root pushes the buffer to every peer."""
        wire = self.wire_bytes(message_bytes)
        return ((nranks - 1) * wire, 0) if rank == root else (0, wire)

    def zero_copy_traffic(self, message_bytes: int, nranks: int, rank: int, root: int = 0) -> tuple[int, int]:
        """Zero-copy, scatter + all-gather (``shard_traffic.scatter_gather_traffic``)."""
        return scatter_gather_traffic(call_shards(message_bytes, nranks), rank, root)

    def param_values(self, call: Call) -> tuple:
        return (call.root,)

    def window_buffers(self, call: Call) -> tuple[tuple[CallBuffer, int], ...] | None:
        """Non-roots read the root's input and write each other's outputs (the root writes its shard into each):
        every rank's input and output, so that a rank reaches each peer's buffer of the same argument (in place the
        same buffer twice: ranks in and out of place map alike)."""
        return ((call.send, call.peer_bytes), (call.recv, call.peer_bytes))

    def zero_copy_args(self, windows: tuple) -> dict:
        sent, got = windows[0], windows[-1]
        base = self.kernel_launch.values
        return {"chans": base["chans"], "call_check": base["call_check"], "fingerprint": 0, "ins": sent.handles,
                "outs": got.handles, "inp": sent.local, "out": got.local, "nbytes": 0, "rank": self.rank,
                "nranks": self.nranks, "root": 0}

    @classmethod
    def zero_copy_argtypes(cls, nranks: int) -> tuple:
        return kernel_argtypes(nranks, 2, 4)

    def bind_zero_copy(self, launch: Launch, call: Call) -> None:
        """The root's output and the others' input are any buffers: this call's."""
        launch.set_buffer("inp", call.send.ptr, call.peer_bytes, call.send.array)
        launch.set_buffer("out", call.recv.ptr, call.peer_bytes, call.recv.array)
        launch.set_int("root", call.root)


BY_COLLECTIVE = {"all_reduce": AllReduce, "all_gather": AllGather, "reduce_scatter": ReduceScatter,
                 "all_to_all": AllToAll, "broadcast": Broadcast}

