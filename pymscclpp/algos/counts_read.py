"""The all-to-all with counts zero-copy on the one-shot lanes (``counts_read_kernels``): for calls whose every send
buffer is mapped on every rank (one registration, or a captured call), each rank reads its ranges from its peers'
send buffers between two meetings of the call check's kind, on the even all-to-all's grid for the size.
"""

from __future__ import annotations

from numba.core import types

from .. import config
from ..callcheck.area import callcheck
from ..errors import InvalidUsageError
from ..runtime.fingerprint import windows_tag, zero_copy
from ..runtime.launch import Launch
from .algorithm import Algorithm, Call, Constraint
from .counts_read_kernels import exchange_counts_read_simple
from .exchange import call_span
from .exchange_kernels import ROW, ZC_PEERS
from .grid import blocks_for, call_blocks
from .oneshot import lanes
from .prepared import launch_call
from .windows import PreparedLaunches, Windows
from .zero_copy import kernel_argtypes


class AllToAllvRead(Algorithm):
    """``all_to_allv`` zero-copy: served when the call carries the window its ranks read each other's send buffers
    through (``all_to_allv`` decides that on every rank alike, from what they trade), on ``blocks`` blocks of
    ``threads`` (half of them below ``grid.SMALL_COPY_BYTES``, as the even all-to-all)."""

    collective = "all_to_allv"
    name = "read"
    constraint = Constraint(hosts=1, max_ranks=ZC_PEERS + 1)  # a read mode bit per peer (``copy_reads``)
    kernels: dict = {}  # no staged kernel: a call without the window is the exchange's
    zero_copy_kernel = exchange_counts_read_simple

    def __init__(self, blocks: int, threads: int):
        self.blocks, self.threads = blocks, threads

    def setup(self, comm) -> None:
        self.check = callcheck(comm)
        self.blocks = blocks_for(comm, self.blocks)
        self.lanes = lanes(comm, "simple", self.blocks)
        self.windows = comm.extension("windows", Windows)
        self._prepared = PreparedLaunches(self.windows)
        self.rank, self.nranks = comm.rank, comm.size

    @classmethod
    def zero_copy_argtypes(cls, nranks: int) -> tuple:
        """The numba types of the kernel's arguments on ``nranks`` ranks (``_new_launch``'s order)."""
        i64 = types.int64
        return (*kernel_argtypes(nranks, 1, 0), types.UniTuple(i64, ROW * nranks), i64, i64)

    def why_not(self, comm, call: Call) -> str | None:
        if not config.get("PYMSCCLPP_CHECK"):
            return "needs the call check (PYMSCCLPP_CHECK=1): the ranks choose to read zero-copy together from the " \
                   "counts it trades"
        return super().why_not(comm, call)

    def runs_zero_copy(self, call: Call) -> bool:
        """Whether ``call`` carries the window every rank reads (else the exchange serves it)."""
        return call.window is not None and bool(call.layout)

    def kernel_launches(self) -> list[Launch]:
        """The launches prepared for registered windows."""
        return self._prepared.values()

    def _new_launch(self, window, blocks: int) -> Launch:
        v = self.lanes.view
        args = {"chans": self.lanes.handles, "call_check": self.check.handle, "fingerprint": 0, "windows": 0,
                "ins": window.handles, "inp": v, "out": v, "table": (0,) * (ROW * self.nranks), "rank": self.rank,
                "nranks": self.nranks}
        return Launch(self.zero_copy_kernel, blocks, self.threads, args, argtypes=self.zero_copy_argtypes(self.nranks))

    def launch(self, call: Call) -> None:
        if not self.runs_zero_copy(call):
            raise InvalidUsageError("all_to_all with counts: algorithm 'read' reads peers' send buffers, so every "
                                    "rank's send buffer must start a registration (register_buffer) or the call be "
                                    "captured into a CUDA graph")
        window = call.window
        blocks = call_blocks(self.blocks, call.message_bytes, copies=True)
        if window.serial < 0:  # a captured call's mapping: its graph keeps the launch's arguments
            launch = self._new_launch(window, blocks)
        else:
            launch = self._prepared.get((window,), lambda mapped: self._new_launch(mapped[0], blocks), blocks)
        self.ran(launch)
        tag = windows_tag(self.collective, [window.serial])
        launch_call(launch, call, lambda prepared, c: self._bind(prepared, c, tag))

    def _bind(self, launch: Launch, call: Call, tag: int) -> None:
        """The call's buffers (as far as its table reaches), table, fingerprint (the counts' digest, the same on
        every rank: ``call.root``) and windows tag."""
        launch.set_buffer("inp", call.send.ptr, call_span(call.layout, self.nranks, False), call.send.array)
        launch.set_buffer("out", call.recv.ptr, call_span(call.layout, self.nranks, True), call.recv.array)
        launch.set_ints("table", call.layout)
        launch.set_int("fingerprint", zero_copy(self.check.fingerprint(call)))
        launch.set_int("windows", tag)

    def traffic(self, message_bytes: int, nranks: int, rank: int, root: int = 0) -> tuple[int, int]:
        """The bench's even counts (``message_bytes`` the send buffer): each peer's part read from its buffer."""
        part = message_bytes // nranks
        return (nranks - 1) * part, (nranks - 1) * part

    def close(self) -> None:
        """Drop the windows (they hold the communicator)."""
        self.windows = self._prepared = None
