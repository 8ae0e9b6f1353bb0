"""A collective served by launches prepared once (``runtime.launch.Launch``) on a fixed grid: a call sets a
launch's slots only when it differs from the call that set them last, and a call the Communicator keeps
(``algos.repeats``) goes out as its own graph. Families say what a call sets (``bind``) on which kernel."""

from __future__ import annotations

from typing import Callable

from ..callcheck.area import MAX_BLOCKS
from ..errors import InvalidUsageError
from ..runtime.launch import Launch
from .algorithm import Algorithm, Call


def launch_call(launch: Launch, call: Call, bind: Callable[[Launch, Call], None] | None) -> None:
    """Issue ``launch`` for ``call`` on its stream, ``bind`` (None: nothing) setting its slots first; a kept call
    goes out as its own graph once it has been launched twice, whichever calls came between."""
    kept = call if call.kept else None  # the same object each repeat: its own graph's key
    if kept is not None and launch.launch_kept(kept, call.stream):
        return
    if bind is not None:
        bind(launch, call)
    launch.launch(call.stream, kept)


class PreparedKernel(Algorithm):
    """A collective on ``blocks`` blocks (at most the call check's ``MAX_BLOCKS``) of ``threads``, served by
    messages up to ``max_bytes``; ``setup`` prepares ``kernel_launch`` (``prepare``)."""

    launch_reads_buffers = False  # the addresses in call.send/recv are all it needs

    def __init__(self, name: str, protocol: str, blocks: int, threads: int, max_bytes: float = float("inf")):
        if not 0 < blocks <= MAX_BLOCKS:
            raise InvalidUsageError(f"{name}: a built-in kernel runs on 1 to {MAX_BLOCKS} blocks, got {blocks}")
        self.name, self.protocol, self.blocks, self.threads = name, protocol, blocks, threads
        self.message_range = (0, max_bytes)
        self.kernel_launch: Launch | None = None  # its compile_s and disk_cache_hit say how it got ready

    def prepare(self, kernel, args: dict, argtypes: tuple) -> None:
        """Prepare ``kernel_launch`` of ``kernel`` on ``args`` (their numba types ``argtypes``)."""
        self.kernel_launch = Launch(kernel, self.blocks, self.threads, args, argtypes=argtypes)
        self._bound: Call | None = None  # the call whose buffers and integers the launch's slots hold (by identity)

    def kernel_launches(self) -> list[Launch]:
        """Every launch this algorithm has prepared (what ``precompile`` must have built)."""
        return [self.kernel_launch]

    def bind(self, launch: Launch, call: Call) -> None:
        """Set ``launch``'s slots for ``call``: its buffers and per-call integers."""
        raise NotImplementedError

    def launch(self, call: Call) -> None:
        """Not thread-safe: one call at a time per communicator, as with NCCL. The very call launched last
        (a repeat) goes out with its slots as they are."""
        self.ran(self.kernel_launch)
        if call is self._bound:
            launch_call(self.kernel_launch, call, None)
            return
        launch_call(self.kernel_launch, call, self.bind)
        self._bound = call
