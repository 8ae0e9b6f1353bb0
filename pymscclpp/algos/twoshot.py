"""Two-step algorithms for large messages at many ranks (``twoshot_kernels``): the one-shot lanes (channels,
scratch, flags) and prepared launch, read-based kernels that move each byte across a link once."""

from __future__ import annotations

from numba.core import types

from ..channels import reduce as red
from ..runtime import handle_types as ht
from ..runtime.fingerprint import REGISTERED
from ..runtime.launch import Launch
from . import twoshot_kernels as k2
from .algorithm import Call
from ..callcheck.area import handle_type
from .oneshot import AllGather, Broadcast, OneShot, simple_round_bytes
from .windows import Windows


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
    2N(n-1)/n where the one-shot all-reduce moves N(n-1); bit-identical on every rank. A call whose buffers are
    registered with the communicator (``register_buffer``, at their start) runs zero-copy (``rsag_zero_copy``):
    peers' inputs are read and peers' outputs written directly, no scratch copy; its fingerprint says so, so ranks
    that disagree on it fail the call check."""

    collective = "all_reduce"
    kernels = {"simple": k2.all_reduce_rsag_simple}
    params = ("kind", "op")
    ops = frozenset(red.OPS)  # avg too: each shard reduced in one pass (reduce_peers), then divided

    def setup(self, comm) -> None:
        super().setup(comm)
        self.windows = comm.extension("windows", Windows)
        self._zero_copy: dict[tuple, Launch] = {}  # (send window, recv window) -> its prepared launch
        self._generation = self.windows.generation

    def param_values(self, call: Call) -> tuple:
        return (red.DTYPE_KINDS[call.dtype], red.OPS[call.op])

    def kernel_launches(self) -> list[Launch]:
        return [self.kernel_launch, *self._zero_copy.values()]

    @staticmethod
    def zero_copy_argtypes(nranks: int) -> tuple:
        """The numba types of ``all_reduce_zero_copy_simple``'s arguments on ``nranks`` ranks."""
        chans = types.UniTuple(ht.memory_channel(), nranks - 1)
        i64 = types.int64
        return (chans, handle_type(nranks - 1), i64, chans, chans, ht.BYTES, ht.BYTES, i64, i64, i64, i64, i64)

    def _zero_copy_launch(self, call: Call) -> Launch | None:
        """The prepared zero-copy launch for ``call``'s registered buffers, or None when either is not registered."""
        sent = self.windows.find(call.send[0], call.nbytes)
        got = sent if call.in_place else self.windows.find(call.recv[0], call.nbytes)
        if sent is None or got is None:
            return None
        if self._generation != self.windows.generation:  # a deregistration: launches of closed windows go
            self._zero_copy.clear()
            self._generation = self.windows.generation
        key = (sent.address, got.address)
        launch = self._zero_copy.get(key)
        if launch is None:
            base = self.kernel_launch.values
            args = {"chans": base["chans"], "cc": base["cc"], "fp": 0, "ins": sent.handles, "outs": got.handles,
                    "inp": sent.local, "out": got.local, "nbytes": 0, "rank": base["rank"], "nranks": base["nranks"],
                    "kind": 0, "op": 0}
            launch = self._zero_copy[key] = Launch(k2.all_reduce_zero_copy_simple, self.blocks, self.threads, args,
                                                   argtypes=self.zero_copy_argtypes(self.size))
        return launch

    def launch(self, call: Call) -> None:
        launch = self._zero_copy_launch(call)
        if launch is None:
            super().launch(call)
            return
        kept = call if call.sendbuf is None else None
        if kept is not None and launch.launch_kept(kept, call.stream):
            return
        fp = self.check.fingerprint(call)
        launch.set_int("fp", fp | REGISTERED if fp else 0)
        launch.set_int("nbytes", call.nbytes)
        launch.set_int("kind", red.DTYPE_KINDS[call.dtype])
        launch.set_int("op", red.OPS[call.op])
        launch.launch(call.stream, kept)

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
