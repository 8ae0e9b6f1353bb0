"""The exchange algorithms (``exchange_kernels``): send/recv groups, all-to-all with counts, gather, scatter and
reduce on one host, each call one launch of one kernel whose per-peer table travels as kernel arguments (so a
CUDA graph captures it), over lanes of their own: a MemoryChannel to every peer with two semaphores per stripe
(and per block, for a reduce), a ring of ``SLOTS`` slots per sender in the scratch, and a pair-check area.
``layout`` builds the table of a call.
"""

from __future__ import annotations

import numpy as np
from numba.core import types

from .. import config
from ..channels import reduce as red
from ..runtime import handle_types as ht
from ..runtime.backend import IS_SIM
from ..runtime.buffers import buffer_info
from ..runtime.fingerprint import pack
from ..runtime.launch import Launch
from ..runtime.memory import PeerMemory, alloc
from .algorithm import Algorithm, Call, Constraint
from .exchange_kernels import (AREA_SLOT, IS_READ, MAX_RANKS, READ_ZC, READS, ROW, SEND_ZC, ZC_PEERS,
                               peer_exchange_simple, peer_read_simple, peer_reduce_simple)
from .grid import blocks_for
from .windows import MAX_SERIAL, PreparedLaunches, Windows

EXCHANGED = ("send_recv", "all_to_allv", "gather", "scatter", "reduce")  # the collectives these algorithms serve
# the simulator runs blocks one after another, so one block (``exchange_kernels``); its rounds, stripes and
# rings small, so tests run many stripes, rounds and wrap-arounds
GRID = (1, 32) if IS_SIM else (32, 512)
CHUNK = 4096 if IS_SIM else 1 << 20  # the cross-host exchange's bytes per round and sender (two halves each)
# ring slots per sender, and bytes per round and sender: on one H200 under MPS (8 ranks, 64 MB send/recv) a round
# costs ~18 us beyond its bytes, so two 4 MB slots ran 1.9x faster than four of 1 MB (docs/performance.md)
SLOTS = 2
SLOT_BYTES = 1024 if IS_SIM else 4 << 20
STRIPES = 4 if IS_SIM else 16  # the most stripes a stream runs on (``exchange_kernels``)
STRIPE_BYTES = 256 if IS_SIM else 64 << 10  # a stream takes a stripe per STRIPE_BYTES of a round


def layout(nranks: int, sends: dict, recvs: dict, descriptors: dict | None, codes: dict | None = None) -> tuple:
    """A call's kernel table: ``sends``/``recvs`` map a rank to its (offset, bytes) range (absent: nothing),
    ``descriptors`` a rank to (send descriptor, receive descriptor) (None: the check is off), ``codes`` a rank to
    (send code, read code, peer offset) (absent, the check off, or more peers than the kernel tells apart: the pair
    stages; ``exchange_kernels``)."""
    if nranks - 1 > ZC_PEERS:  # both ends of a pair must see its codes, whatever their peer indices
        codes = None
    table = []
    for p in range(nranks):
        s, r = sends.get(p, (0, 0)), recvs.get(p, (0, 0))
        fps = (0, 0) if descriptors is None else descriptors.get(p, (0, 0))
        zc = (0, 0, 0) if descriptors is None or codes is None else codes.get(p, (0, 0, 0))
        table += [s[0], s[1], r[0], r[1], *fps, *zc]
    return tuple(int(v) for v in table)


def zero_copy_code(window) -> int:
    """What a rank trades about a mapped buffer (``exchange_kernels``): its registration's serial + 1, or, for a
    captured call's mapping (which every rank of the call takes together), one code above every serial's."""
    return window.serial + 1 if window.serial >= 0 else MAX_SERIAL + 2


def descriptor(collective: str, nbytes: int, dtype: str, op: str = "sum", root: int = 0) -> int:
    """What a rank trades with a peer about one direction of their call (``runtime.fingerprint``)."""
    return pack(collective, nbytes, dtype, op, root)


def rooted_descriptors(nranks: int, rank: int, collective: str, nbytes: int, dtype: str, root: int,
                       op: str = "sum") -> dict | None:
    """Pair descriptors of a rooted call moving ``nbytes`` between the root and every other rank, toward the
    root (gather, reduce) or from it (scatter); nothing between two ranks that are not the root (None: the check
    is off)."""
    if not config.get("PYMSCCLPP_CHECK"):
        return None
    to_root = collective != "scatter"
    out = {}
    for p in range(nranks):
        if p != rank:
            sends, receives = ((p == root), (rank == root)) if to_root else ((rank == root), (p == root))
            out[p] = (descriptor(collective, nbytes if sends else 0, dtype, op, root),
                      descriptor(collective, nbytes if receives else 0, dtype, op, root))
    return out


class ExchangeLanes:
    """What every exchange algorithm of a communicator shares: channels, scratch, pair area, sequence words, and
    the prepared launches (calls run one after another, as with NCCL): one without mapped peer buffers, one per
    registered window a call reads peers' buffers through, and of ``peer_read_simple`` (no rings) one per window
    of calls whose every pair reads zero-copy."""

    def __init__(self, comm):
        from numba import cuda
        self.size, self.rank = comm.size, comm.rank
        self.blocks = blocks_for(comm, GRID[0])
        # a stream's stripes: half the grid, so a ring's send and receive stripes fill it and a rank with many
        # peers has few per block (the simulator's one block: STRIPES, so tests run several)
        self.stripes = STRIPES if IS_SIM else max(1, min(STRIPES, self.blocks // 2))
        self.scratch = alloc(SLOTS * comm.size * SLOT_BYTES)
        self.area = alloc(2 * comm.size * AREA_SLOT)
        self.peers = [p for p in range(comm.size) if p != comm.rank]
        self.channels = comm.memory_channels(self.peers, src=self.scratch, inbox=self.scratch,
                                             semaphores=2 * max(self.blocks, STRIPES))
        self.remotes = [comm.exchange_memory(self.area, p) for p in self.peers]
        self.view = self.channels[self.peers[0]].inbox  # the scratch as the uint8 array kernels take
        self.address = buffer_info(self.scratch).ptr
        self.seqs = cuda.to_device(np.zeros(self.blocks * comm.size, np.uint32))
        self.seen = cuda.to_device(np.zeros(min(len(self.peers), ZC_PEERS), np.uint32))
        self._args = {"chans": tuple(self.channels[p].device_handle() for p in self.peers),
                      "areas": tuple(r.array for r in self.remotes), "area": self.area,
                      "table": (0,) * (ROW * comm.size), "ins": (PeerMemory(self.view),) * len(self.peers),
                      "inp": self.view, "out": self.view, "scratch": self.view, "seqs": self.seqs, "seen": self.seen,
                      "chunk": SLOT_BYTES, "slots": SLOTS, "stripes": self.stripes, "stripe_bytes": STRIPE_BYTES,
                      "rank": comm.rank, "nranks": comm.size, "root": -1, "kind": 0, "op": 0}
        self.kernel_launch = self._launch(self._args["ins"])
        self._reduce_launch: Launch | None = None  # built (compiled) by the first reduce: ``reduce_launch``
        windows = comm.extension("windows", Windows)
        self.zero_copy, self.reads = PreparedLaunches(windows), PreparedLaunches(windows)

    def _launch(self, ins: tuple, kernel=peer_exchange_simple) -> Launch:
        """A launch of ``kernel`` reading peers' mapped buffers through ``ins`` (placeholders when it maps none)."""
        return Launch(kernel, self.blocks, GRID[1], dict(self._args, ins=ins), argtypes=argtypes(self.size))

    def reduce_launch(self) -> Launch:
        """The launch of the kernel that reduces (a reduce maps no peer buffers), built on first use: a
        communicator that never reduces through the exchange never compiles it."""
        if self._reduce_launch is None:
            self._reduce_launch = self._launch(self._args["ins"], peer_reduce_simple)
        return self._reduce_launch

    def kernel_launches(self) -> list[Launch]:
        """Every launch prepared: the one without mapped buffers, the reducing one once built, and those of
        registered windows."""
        reducing = [] if self._reduce_launch is None else [self._reduce_launch]
        return [self.kernel_launch, *reducing, *self.zero_copy.values(), *self.reads.values()]

    def reads_only(self, call: Call) -> bool:
        """Whether every pair of ``call`` reads zero-copy: the ranks agreed on it (an all-to-all with counts on
        one registration, from the counts every rank trades) or mapped its buffers together (a captured call)."""
        window = call.window
        return window is not None and (window.serial < 0 or call.collective == "all_to_allv") and \
            self.size - 1 <= ZC_PEERS  # beyond, ``layout`` sets no codes: every pair stages

    def launch(self, call: Call) -> Launch:
        """Issue ``call`` (its ``layout`` the table), reading peers' buffers through the window it carries, if
        any (prepared once per registered window; a captured call's launch is its graph's), without rings where
        every pair reads zero-copy; a reduce on the kernel that reduces."""
        window = call.window
        kernel, prepared = (peer_read_simple, self.reads) if self.reads_only(call) else \
            (peer_exchange_simple, self.zero_copy)
        if call.collective == "reduce":
            k = self.reduce_launch()
        elif window is None:
            k = self.kernel_launch
        elif window.serial >= 0:
            k = prepared.get((window,), lambda windows: self._launch(windows[0].handles, kernel))
        else:
            k = self._launch(window.handles, kernel)
        bind(k, call, self.size, self.address, self.view)
        k.launch(call.stream)
        return k

    def pair_modes(self) -> dict[int, str]:
        """How the last call moved data with each peer, as its block 0 saw it (read it once the call's stream is
        synchronized): ``read`` (we read the peer's bytes from its buffer), ``read by`` (it read ours), both, or
        ``staged`` (or nothing)."""
        seen = self.seen.copy_to_host()
        names = {0: "staged", READS: "read", IS_READ: "read by", READS | IS_READ: "read, read by"}
        return {p: names[int(seen[j])] for j, p in enumerate(self.peers[:ZC_PEERS])}

    def close(self) -> None:
        for ch in self.channels.values():
            ch.close()
        for r in self.remotes:
            r.close()
        self.channels, self.remotes, self.zero_copy, self.reads = {}, [], None, None  # the windows hold the comm


def bind(k: Launch, call: Call, nranks: int, address: int, placeholder) -> None:
    """Set an exchange launch's slots for ``call``: its buffers (a side with none, nothing to send or receive, views
    ``placeholder`` at ``address``), its table, and the root, dtype and op of a reduce."""
    for slot, (ptr, array) in (("inp", call.send), ("out", call.recv)):
        if ptr is None:
            k.set_buffer(slot, address, placeholder.size, placeholder)
        else:
            k.set_buffer(slot, ptr, call_span(call.layout, nranks, slot == "out"), array)
    k.set_ints("table", call.layout)
    reducing = call.collective == "reduce"
    k.set_int("root", call.root if reducing else -1)
    k.set_int("kind", red.DTYPE_KINDS[call.dtype] if reducing else 0)
    k.set_int("op", red.OPS[call.op] if reducing else 0)


def call_span(table: tuple, nranks: int, receive: bool) -> int:
    """Bytes of the send (or receive) buffer a table reaches: the end of its furthest range."""
    at = 2 if receive else 0
    return max([table[ROW * p + at] + table[ROW * p + at + 1] for p in range(nranks)] + [1])


def argtypes(nranks: int) -> tuple:
    """The numba types of the exchange entry kernels' arguments on ``nranks`` ranks (``exchange_kernels``)."""
    i64 = types.int64
    return (types.UniTuple(ht.memory_channel(), nranks - 1), types.UniTuple(ht.BYTES, nranks - 1), ht.BYTES,
            types.UniTuple(i64, ROW * nranks), types.UniTuple(ht.peer_memory(), nranks - 1), ht.BYTES, ht.BYTES,
            ht.BYTES, ht.U32, ht.U32, *(i64,) * 9)


def lanes(comm) -> ExchangeLanes:
    """The communicator's exchange lanes (built collectively on first use)."""
    return comm.extension("exchange", ExchangeLanes)


class Exchange(Algorithm):
    """``collective`` (one of ``EXCHANGED``) as one exchange launch on one host; reduce serves every dtype and op
    the built-in reductions do, avg included."""

    name = "exchange"
    constraint = Constraint(hosts=1, max_ranks=MAX_RANKS)
    ops = frozenset(red.OPS)
    zero_copy_kernel = peer_read_simple  # a call whose every pair reads peers' buffers (``runs_zero_copy``)

    def __init__(self, collective: str):
        self.collective = collective
        self.lanes: ExchangeLanes | None = None

    def setup(self, comm) -> None:
        self.lanes = lanes(comm)

    def kernel_launches(self) -> list[Launch]:
        """The launches ``precompile`` must have built."""
        return self.lanes.kernel_launches()

    def runs_zero_copy(self, call: Call) -> bool:
        """Whether some pair of ``call`` may read zero-copy: its table carries a pair's codes (``layout``)."""
        table = call.layout
        return any(table[ROW * p + SEND_ZC] or table[ROW * p + READ_ZC] for p in range(len(table) // ROW))

    def launch(self, call: Call) -> None:
        self.ran(self.lanes.launch(call))

    def pair_modes(self) -> dict[int, str]:
        """How this communicator's last exchange call moved data with each peer (``ExchangeLanes.pair_modes``)."""
        return self.lanes.pair_modes()

    def traffic(self, size: int, nranks: int, rank: int, root: int = 0) -> tuple[int, int]:
        """What goes through the channels for the bench's calls of ``size`` bytes (``bench.traffic``): a ring of
        ``size`` (send_recv), even counts (all_to_allv), ``size`` the gathered output (gather), the root's send
        buffer (scatter) or the buffer (reduce)."""
        part = size // nranks
        if self.collective == "send_recv":
            return size, size
        if self.collective == "all_to_allv":
            return (nranks - 1) * part, (nranks - 1) * part
        if self.collective == "gather":
            return (0, (nranks - 1) * part) if rank == root else (part, 0)
        if self.collective == "scatter":
            return ((nranks - 1) * part, 0) if rank == root else (0, part)
        return (0, (nranks - 1) * size) if rank == root else (size, 0)
