"""Two-step algorithms for large messages at many ranks (``twoshot_kernels``): the one-shot lanes (channels,
scratch, flags) and prepared launch, read-based kernels that move each byte across a link once, zero-copy
(``zero_copy``) where the call's buffers are mapped on every rank."""

from __future__ import annotations

from numba.core import types

from ..channels import reduce as red
from ..runtime import handle_types as ht
from ..runtime.launch import Launch
from . import twoshot_kernels as k2
from .algorithm import Call, CallBuffer
from .oneshot import AllGather, Broadcast, OneShot, reduce_output, simple_round_bytes
from .shard_traffic import call_shards, scatter_gather_traffic
from .zero_copy import ZeroCopyReduce, kernel_argtypes


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


class AllReduceTwoShot(ZeroCopyReduce, OneShot):
    """Reduce-scatter then all-gather in one kernel, read-based (MSCCL++'s ``rsag``): each rank sends and receives
    2N(n-1)/n where the one-shot all-reduce moves N(n-1); bit-identical on every rank. A call whose buffers are
    registered with the communicator (``register_buffer``, at their start) runs zero-copy (``rsag_zero_copy``):
    peers' inputs are read and peers' outputs written directly, no scratch copy."""

    collective = "all_reduce"
    kernels = {"simple": k2.all_reduce_rsag_simple}
    zero_copy_kernel = k2.all_reduce_zero_copy_simple
    params = ("kind", "op")
    ops = frozenset(red.OPS)  # avg too: each shard reduced in one pass (reduce_peers), then divided

    def window_buffers(self, call: Call) -> tuple[tuple[CallBuffer, int], ...]:
        """Peers read our input and write our output (in place the same buffer twice: ranks in and out of place
        map alike)."""
        return ((call.send, call.peer_bytes), (call.recv, call.peer_bytes))

    def zero_copy_args(self, windows: tuple) -> dict:
        sent, got = windows[0], windows[-1]
        base = self.kernel_launch.values
        return {"chans": base["chans"], "call_check": base["call_check"], "fingerprint": 0, "ins": sent.handles,
                "outs": got.handles,
                "inp": sent.local, "out": got.local, "nbytes": 0, "rank": base["rank"], "nranks": base["nranks"],
                "kind": 0, "op": 0}

    @classmethod
    def zero_copy_argtypes(cls, nranks: int) -> tuple:
        return kernel_argtypes(nranks, 2, 5)

    def traffic(self, message_bytes: int, nranks: int, rank: int, root: int = 0) -> tuple[int, int]:
        """Peers pull the other shards of our staged input and our reduced shard; we pull theirs alike."""
        moved = sum((nranks - 1) * lens[rank] + sum(lens) - lens[rank]
                    for lens in round_shards(message_bytes, nranks, nranks - 1))
        return moved, moved

    def zero_copy_traffic(self, message_bytes: int, nranks: int, rank: int, root: int = 0) -> tuple[int, int]:
        """We read our shard of every peer's input and write it reduced into every peer's output; they alike."""
        lens = call_shards(message_bytes, nranks)
        moved = (nranks - 1) * lens[rank] + sum(lens) - lens[rank]
        return moved, moved


class ReduceScatterRead(ZeroCopyReduce, OneShot):
    """Reduce-scatter by reads: rank r reduces slot r reading every peer's staged copy of it, or, when the send
    buffer is registered (``register_buffer``, at its start), every peer's input directly (zero-copy)."""

    collective = "reduce_scatter"
    kernels = {"simple": k2.reduce_scatter_read_simple}
    zero_copy_kernel = k2.reduce_scatter_zero_copy_simple
    params = ("kind", "op")
    ops = frozenset(red.OPS)  # avg too: one pass over every source (reduce_peers), then divided
    send_all = True

    def window_buffers(self, call: Call) -> tuple[tuple[CallBuffer, int], ...]:
        return ((call.send, call.peer_bytes * self.nranks),)

    def zero_copy_args(self, windows: tuple) -> dict:
        (sent,) = windows
        base = self.kernel_launch.values
        return {"chans": base["chans"], "call_check": base["call_check"], "fingerprint": 0, "ins": sent.handles,
                "inp": sent.local,
                "out": base["out"], "nbytes": 0, "rank": base["rank"], "nranks": base["nranks"], "kind": 0, "op": 0}

    def bind_zero_copy(self, launch: Launch, call: Call) -> None:
        """The output is any buffer: this call's."""
        super().bind_zero_copy(launch, call)
        launch.set_buffer("out", call.recv.ptr, call.peer_bytes, call.recv.array)

    @classmethod
    def zero_copy_argtypes(cls, nranks: int) -> tuple:
        return kernel_argtypes(nranks, 1, 5)

    def traffic(self, message_bytes: int, nranks: int, rank: int, root: int = 0) -> tuple[int, int]:
        """Every peer pulls its slot of our staged input; we pull ours from each of theirs."""
        moved = (nranks - 1) * (message_bytes // nranks)
        return moved, moved


class ReduceTwoStep(ZeroCopyReduce, OneShot):
    """Reduce into the root as the two-step all-reduce with a gather for its all-gather (``rsag``): rank r reduces
    shard r, the root reads them all. Zero-copy (``reduce_zero_copy``) on registered send buffers: every rank reads
    the inputs, the root still reads the shards (a non-root cannot know which registration the root's output is);
    captured (registered or not), every rank maps its output too and writes its shard into the root's."""

    collective = "reduce"
    kernels = {"simple": k2.reduce_rsag_simple}
    zero_copy_kernel = k2.reduce_zero_copy_simple
    params = ("kind", "op", "root")
    ops = frozenset(red.OPS)  # avg too: each shard reduced in one pass, then divided
    captured_maps_first = True  # registered send buffers cannot reach the root's output: a capture maps it

    def param_values(self, call: Call) -> tuple:
        return (*super().param_values(call), call.root)

    def window_buffers(self, call: Call) -> tuple[tuple[CallBuffer, int], ...]:
        return ((call.send, call.peer_bytes),)

    def capture_buffers(self, call: Call) -> tuple[tuple[CallBuffer, int], ...]:
        """The send buffer and the output (a non-root's: its send buffer, never written), so the root's reaches
        every rank."""
        return ((call.send, call.peer_bytes), (reduce_output(call), call.peer_bytes))

    def zero_copy_args(self, windows: tuple) -> dict:
        sent, outs = windows[0], windows[-1]  # registered: the outputs are not mapped (the send buffers stand in)
        base = self.kernel_launch.values
        return {"chans": base["chans"], "call_check": base["call_check"], "fingerprint": 0, "ins": sent.handles,
                "outs": outs.handles, "inp": sent.local, "out": base["out"], "scratch": base["scratch"],
                "flags": base["flags"], "nbytes": 0, "slot_bytes": base["slot_bytes"], "rank": base["rank"],
                "nranks": base["nranks"], "kind": 0, "op": 0, "root": 0, "push": int(len(windows) > 1)}

    def bind_zero_copy(self, launch: Launch, call: Call) -> None:
        """The output is any buffer (this call's; a non-root's: its input, never written) and the root this call's."""
        super().bind_zero_copy(launch, call)
        out = reduce_output(call)
        launch.set_buffer("out", out.ptr, call.peer_bytes, out.array)
        launch.set_int("root", call.root)

    @classmethod
    def zero_copy_argtypes(cls, nranks: int) -> tuple:
        i64 = types.int64
        return (*kernel_argtypes(nranks, 2, 0), ht.BYTES, ht.U32, *[i64] * 8)

    def traffic(self, message_bytes: int, nranks: int, rank: int, root: int = 0) -> tuple[int, int]:
        """Per round: every peer reads its shard of our input (staged, or mapped) and we ours of theirs; a non-root
        sends the root its reduced shard, which the root receives from each."""
        sent = received = 0
        for lens in round_shards(message_bytes, nranks, nranks - 1):
            others = sum(lens) - lens[rank]
            sent += others + (lens[rank] if rank != root else 0)
            received += (nranks - 1) * lens[rank] + (others if rank == root else 0)
        return sent, received


class AllGatherRead(AllGather):
    """All-gather by reads from each peer's staged copy: every byte crosses a link once and lands in ``out``
    directly (the one-shot exchange writes peers' scratch, then each rank copies it out again)."""

    kernels = {"simple": k2.all_gather_read_simple}
    params = ()

    def param_values(self, call: Call) -> tuple:
        return ()

    def traffic(self, message_bytes: int, nranks: int, rank: int, root: int = 0) -> tuple[int, int]:
        """Every peer pulls our slot; we pull each of theirs."""
        moved = (nranks - 1) * (message_bytes // nranks)
        return moved, moved


class BroadcastScatterGather(Broadcast):
    """Broadcast as scatter + all-gather: the root sends about 2N(n-1)/n, not N(n-1)."""

    kernels = {"simple": k2.broadcast_scatter_gather_simple}

    def traffic(self, message_bytes: int, nranks: int, rank: int, root: int = 0) -> tuple[int, int]:
        """Rank r pulls shard r from the root, then every shard it lacks from the rank holding it (the root's own
        from the root): the root sends each shard once and its own to every peer; the others receive it all."""
        sent = received = 0
        for lens in round_shards(message_bytes, nranks, nranks):
            s, r = scatter_gather_traffic(lens, rank, root)
            sent, received = sent + s, received + r
        return sent, received

    def zero_copy_traffic(self, message_bytes: int, nranks: int, rank: int, root: int = 0) -> tuple[int, int]:
        """The scatter + all-gather of one round: the root's input and the others' outputs read directly."""
        return scatter_gather_traffic(call_shards(message_bytes, nranks), rank, root)


TWO_STEP = {"all_reduce": AllReduceTwoShot, "all_gather": AllGatherRead, "broadcast": BroadcastScatterGather,
            "reduce_scatter": ReduceScatterRead, "reduce": ReduceTwoStep}
