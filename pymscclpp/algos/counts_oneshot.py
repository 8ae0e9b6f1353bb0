"""All-to-alls with counts in one hop (``counts_oneshot_kernels``) on the one-shot lanes of their protocol: packets
for small calls, simple rounds for large ones; one meeting a call (a round), where the verbs' exchange meets twice
and streams through rings. Served only with the call check on, which keeps the ranks in step and gives every rank
the same fingerprint: a digest of every rank's counts, which ``all_to_allv`` trades on the host before any launch.
"""

from __future__ import annotations

from numba.core import types

from .. import config
from ..callcheck.area import callcheck, handle_type
from ..runtime import handle_types as ht
from ..runtime.launch import Launch
from .algorithm import Call, Constraint
from .counts_oneshot_kernels import exchange_counts_ll, exchange_counts_simple
from .exchange import call_span
from .exchange_kernels import MAX_RANKS, ROW
from .grid import blocks_for
from .oneshot import lanes
from .prepared import PreparedKernel


class AllToAllvOneShot(PreparedKernel):
    """``all_to_allv`` in one hop of ``protocol``: packets up to ``max_bytes`` (at most ``PACKET_MAX``, a packet
    slot's data) sent by any rank, simple rounds at any size. The call's message bytes are the most any rank sends,
    and its peer bytes the most one rank sends one peer, both the same on every rank: every rank judges the call
    alike and takes the rounds the largest range needs."""

    collective = "all_to_allv"
    constraint = Constraint(hosts=1, max_ranks=MAX_RANKS)
    kernels = {"packet": exchange_counts_ll, "simple": exchange_counts_simple}

    def setup(self, comm) -> None:
        self.check = callcheck(comm)
        self.blocks = blocks_for(comm, self.blocks)
        self.lanes = shared = lanes(comm, self.protocol, self.blocks)
        self.nranks = comm.size
        v = shared.view
        args = {"chans": shared.handles, "call_check": self.check.handle, "fingerprint": 0, "inp": v, "out": v,
                "scratch": v, "flags": shared.flags, "table": (0,) * (ROW * comm.size), "nbytes": 0,
                "slot_bytes": shared.slot_bytes, "rank": comm.rank, "nranks": comm.size}
        self.prepare(self.kernels[self.protocol], args, self.argtypes(comm.size))

    @classmethod
    def argtypes(cls, nranks: int) -> tuple:
        """The numba types of the kernels' arguments on ``nranks`` ranks, in ``setup``'s order."""
        i64 = types.int64
        return (types.UniTuple(ht.memory_channel(), nranks - 1), handle_type(nranks - 1), i64, ht.BYTES, ht.BYTES,
                ht.BYTES, ht.U32, types.UniTuple(i64, ROW * nranks), i64, i64, i64, i64)

    def why_not(self, comm, call: Call) -> str | None:
        if not config.get("PYMSCCLPP_CHECK"):
            return "needs the call check (PYMSCCLPP_CHECK=1): its meeting keeps the ranks' rounds in step"
        if not call.layout:
            return "serves all-to-all calls with counts (an exchange table)"
        return super().why_not(comm, call)  # the message range: the most any rank sends, alike on every rank

    def bind(self, launch: Launch, call: Call) -> None:
        """The call's buffers (as far as its table reaches), table, the most one rank sends one peer (the rounds),
        and fingerprint (the counts' digest, the same on every rank: ``call.root``)."""
        launch.set_buffer("inp", call.send.ptr, call_span(call.layout, self.nranks, False), call.send.array)
        launch.set_buffer("out", call.recv.ptr, call_span(call.layout, self.nranks, True), call.recv.array)
        launch.set_ints("table", call.layout)
        launch.set_int("nbytes", call.peer_bytes)
        launch.set_int("fingerprint", self.check.fingerprint(call))

    def traffic(self, message_bytes: int, nranks: int, rank: int, root: int = 0) -> tuple[int, int]:
        """The bench's even counts (``message_bytes`` the send buffer): a slot to every peer, as LL16 packets (8 data
        bytes in 16) or as they are."""
        part = message_bytes // nranks
        moved = (nranks - 1) * (-(-part // 8) * 16 if self.protocol == "packet" else part)
        return moved, moved
