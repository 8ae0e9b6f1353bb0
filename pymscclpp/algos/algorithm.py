"""One interface for every collective algorithm, a hand-written kernel or an execution plan (after MSCCL++'s
``Algorithm``): what it serves (collective, message sizes, ranks and hosts, buffer mode, dtypes and ops), a
collective set-up on first use, and a launch per call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ..channels import reduce as red
from ..runtime.buffers import buffer_info
from ..runtime.collectives import COLLECTIVES, REDUCING  # noqa: F401 (re-exported: what algorithms serve)
from ..runtime.launch import Launch

ANY, IN_PLACE, OUT_OF_PLACE = "any", "in_place", "out_of_place"


@dataclass(frozen=True)
class Constraint:
    """Where an algorithm can run; 0 means any. ``hosts``: how many hosts the ranks span (1: all on one host);
    ``max_ranks``: the most ranks it serves."""

    world_size: int = 0
    ranks_per_host: int = 0
    hosts: int = 0
    max_ranks: int = 0

    def why_not(self, comm) -> str | None:
        """Why ``comm``'s ranks break the constraint, or None when they meet it."""
        hosts = len(set(comm.host_ids))
        if self.world_size and comm.size != self.world_size:
            return f"needs {self.world_size} ranks, the communicator has {comm.size}"
        if self.max_ranks and comm.size > self.max_ranks:
            return f"serves at most {self.max_ranks} ranks, the communicator has {comm.size}"
        if self.hosts and hosts != self.hosts:
            return f"needs ranks on {self.hosts} host(s), the communicator spans {hosts}"
        if self.ranks_per_host and len(comm.local_peers) != self.ranks_per_host:
            return f"needs {self.ranks_per_host} ranks per host, this host has {len(comm.local_peers)}"
        return None


class CallBuffer(NamedTuple):
    """One of a call's buffers as a kernel takes it: its device address and, under the simulator (which has no
    addresses), its bytes as a uint8 device array (None on the GPU)."""

    ptr: int
    array: object = None


def device_buffer(buf) -> CallBuffer:
    """A device array as a Call holds it."""
    return CallBuffer(buffer_info(buf).ptr, buf)


@dataclass(frozen=True, kw_only=True, slots=True)
class Call:
    """One checked collective call, as an algorithm launches it. ``sendbuf``/``recvbuf`` are the caller's buffers
    (``recvbuf`` is ``sendbuf`` in place); ``send``/``recv`` the same buffers as kernels take them; ``peer_bytes``
    is what one rank sends one peer (with counts, the most any rank sends one); ``message_bytes`` the message size
    selection reads. ``kept``: a call the Communicator remembers (``algos.repeats``) and launches again as this very
    object; for an algorithm whose launch reads addresses only it holds no buffer objects (``sendbuf``/``recvbuf``
    None), so a launch may key what it prepared by the call's identity. ``layout``: an exchange call's per-peer
    table (``algos.exchange``; send/recv, all-to-all with counts, gather, scatter, reduce), else empty; ``window``:
    the mapped send buffers (``algos.windows.Window``) a zero-copy exchange reads peers' data from, else None."""

    collective: str
    sendbuf: object
    recvbuf: object
    send: CallBuffer
    recv: CallBuffer
    peer_bytes: int
    message_bytes: int
    dtype: str
    op: str
    root: int
    stream: int
    in_place: bool
    layout: tuple = ()
    kept: bool = False
    window: object = None


class Algorithm:
    """Base of every algorithm. Subclasses set ``name`` and ``collective`` and implement ``setup`` and
    ``launch``; the communicator calls ``setup`` once, on every rank alike, before the first ``launch``."""

    name: str = ""
    collective: str = ""
    message_range: tuple[int, float] = (0, float("inf"))
    buffer_mode: str = ANY
    constraint: Constraint = Constraint()
    dtypes: frozenset = frozenset(red.DTYPE_KINDS)  # what its reductions combine (reducing collectives)
    ops: frozenset = red.PAIRWISE_OPS  # avg only where a kernel divides the whole sum (``reduce.finish_word``)
    launch_reads_buffers: bool = True  # launch reads call.sendbuf/recvbuf, not only call.send/recv's addresses
    last_kernel: str = ""  # the kernel this rank's latest launch ran ("": not told), what a benchmark reports
    last_grid: int = 0  # the blocks of that launch (0: not told): the grid cut to the rank's SMs (``grid``)
    zero_copy_kernel = None  # the kernel of its calls that read or write peers' mapped buffers, if it has one

    def ran(self, launch: Launch) -> None:
        """Record ``launch`` as this rank's latest (``last_kernel``, ``last_grid``)."""
        self.last_kernel, self.last_grid = launch.name, launch.griddim

    def why_not(self, comm, call: Call) -> str | None:
        """Why this algorithm cannot serve ``call`` on ``comm``, or None when it can."""
        low, high = self.message_range
        if not low <= call.message_bytes <= high:
            return f"serves messages of {low} to {high} bytes, got {call.message_bytes}"
        if self.buffer_mode == IN_PLACE and not call.in_place or self.buffer_mode == OUT_OF_PLACE and call.in_place:
            return f"runs {self.buffer_mode.replace('_', ' ')} only"
        if call.collective in REDUCING and (call.dtype not in self.dtypes or call.op not in self.ops):
            return f"does not reduce {call.dtype} with {call.op}"
        return self.constraint.why_not(comm)

    def runs_zero_copy(self, call: Call) -> bool:
        """Whether ``call`` would run ``zero_copy_kernel`` (never, without one)."""
        return False

    def setup(self, comm) -> None:
        """Build what the algorithm needs on ``comm`` (collective: every rank calls it in the same order)."""
        raise NotImplementedError

    def launch(self, call: Call) -> None:
        """Enqueue ``call`` on its stream (asynchronous on GPUs; capturable in a CUDA graph)."""
        raise NotImplementedError

    def traffic(self, message_bytes: int, nranks: int, rank: int, root: int = 0) -> tuple[int, int]:
        """(bytes sent, bytes received) through its channels by ``rank`` in one call of ``message_bytes`` (nccl-tests
        sizes, as selection reads them) on ``nranks`` ranks: what ``runtime.traffic`` measures under the simulator."""
        raise NotImplementedError(f"{self!r} states no traffic")

    def zero_copy_traffic(self, message_bytes: int, nranks: int, rank: int, root: int = 0) -> tuple[int, int]:
        """``traffic`` of a call that runs ``zero_copy_kernel``: the bytes ``rank`` reads from and writes into peers'
        buffers, and peers from and into its own; the staged call's unless an algorithm says otherwise."""
        return self.traffic(message_bytes, nranks, rank, root)

    def close(self) -> None:
        """Release what ``setup`` built (the communicator's memory goes with it)."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.collective}/{self.name}>"
