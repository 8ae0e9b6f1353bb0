"""Zero-copy launches of the simple-protocol collectives: when a call's buffers start at registered ones
(``register_buffer``), or the call is being captured into a CUDA graph (its buffers are then mapped on every
rank, ``Windows.capture``), a ``zero_copy_kernel`` reads (and writes) peers' buffers through their windows, no
scratch. The call's fingerprint says so (``fingerprint.zero_copy``), so ranks that disagree fail the call check,
as do ranks whose buffers are of different registrations (the kernel reaches a peer's buffer of the registration
its own belongs to: ``fingerprint.windows_tag``).
"""

from __future__ import annotations

from numba.core import types

from .. import config
from ..callcheck.area import handle_type
from ..channels import reduce as red
from ..runtime import handle_types as ht
from ..runtime.capture import capturing
from ..runtime.fingerprint import windows_tag, zero_copy
from ..runtime.launch import Launch
from .algorithm import Call, CallBuffer
from .grid import call_blocks
from .prepared import launch_call
from .windows import PreparedLaunches, Windows


def kernel_argtypes(nranks: int, windows: int, ints: int) -> tuple:
    """The numba types of a zero-copy kernel's arguments: ``(chans, call_check, fingerprint, windows (the tag),
    *windows' peer handles, inp, out, *ints)`` on ``nranks`` ranks."""
    peers = types.UniTuple(ht.peer_memory(), nranks - 1)
    return (types.UniTuple(ht.memory_channel(), nranks - 1), handle_type(nranks - 1), types.int64, types.int64,
            *[peers] * windows, ht.BYTES, ht.BYTES, *[types.int64] * ints)


class ZeroCopy:
    """Mixin before a ``OneShot`` family (``algos.prepared``): its simple-protocol calls run ``zero_copy_kernel`` when
    they can. Subclasses name the buffers a call needs in windows, the kernel's arguments and what it takes per call."""

    zero_copy_kernel = None
    pushes = False  # the kernel writes into peers' outputs (its fingerprint says so, ``fingerprint.zero_copy``)
    in_place_moves_bytes = False  # in place, peers find our bytes elsewhere in our windows (the tag says so)
    copies = True  # the kernel only moves bytes (``grid.call_blocks``)
    captured_maps_first = False  # a captured call maps ``capture_buffers`` even where its buffers are registered

    def setup(self, comm) -> None:
        super().setup(comm)
        self.windows = comm.extension("windows", Windows)
        self._zero_copy = PreparedLaunches(self.windows)
        self._capture = config.get("PYMSCCLPP_GRAPH_ZERO_COPY")

    def kernel_launches(self) -> list[Launch]:
        return [*super().kernel_launches(), *self._zero_copy.values()]

    def close(self) -> None:
        """Drop the windows (they hold the communicator, which holds this algorithm: no cycle outlives close)."""
        super().close()
        self.windows = self._zero_copy = None

    def window_buffers(self, call: Call) -> tuple[tuple[CallBuffer, int], ...] | None:
        """The buffers (and their bytes) ``call`` reads or writes on peers, each of which must be in a window;
        None: this call cannot run zero-copy."""
        raise NotImplementedError

    def capture_buffers(self, call: Call) -> tuple[tuple[CallBuffer, int], ...]:
        """The buffers (and their bytes) every rank maps when ``call`` is captured: ``window_buffers``, unless a
        family maps more there (a rank may name buffers of its own that a registration could not pair up)."""
        return self.window_buffers(call)

    def zero_copy_args(self, windows: tuple) -> dict:
        """The zero-copy kernel's arguments on ``windows`` (one per ``window_buffers``, or per ``capture_buffers``
        for a captured call; per-call integers 0)."""
        raise NotImplementedError

    @classmethod
    def zero_copy_argtypes(cls, nranks: int) -> tuple:
        """The numba types of the zero-copy kernel's arguments on ``nranks`` ranks."""
        raise NotImplementedError

    def bind_zero_copy(self, launch: Launch, call: Call) -> None:
        """Set what a zero-copy launch takes from each call beyond its windows (nothing, unless overridden)."""

    def _new_launch(self, windows: tuple, blocks: int) -> Launch:
        """A launch on ``windows`` (its windows tag set per call, ``launch``)."""
        args = {}
        for name, value in self.zero_copy_args(windows).items():  # the tag goes after the fingerprint
            args[name] = value
            if name == "fingerprint":
                args["windows"] = 0
        return Launch(self.zero_copy_kernel, blocks, self.threads, args, argtypes=self.zero_copy_argtypes(self.nranks))

    def runs_zero_copy(self, call: Call) -> bool:
        """Whether ``call`` would run zero-copy: its buffers are registered, or it is being captured."""
        return self._zero_copy_windows(call) is not None

    def _zero_copy_windows(self, call: Call) -> tuple | None:
        """(the buffers ``call`` needs in windows, their registered windows: None when the call is captured and
        they are to be mapped now), or None when it runs staged."""
        wanted = self.window_buffers(call) if self.protocol == "simple" else None
        if wanted is None:
            return None
        captured = self._capture and capturing(call.stream)
        if captured and self.captured_maps_first:
            return self.capture_buffers(call), None
        windows = tuple(self.windows.find(buf.ptr, nbytes) for buf, nbytes in wanted)
        if all(w is not None for w in windows):
            return wanted, windows
        return (self.capture_buffers(call), None) if captured else None

    def _zero_copy_launch(self, call: Call) -> tuple[Launch, int] | None:
        """The zero-copy launch for ``call`` on its grid (``grid.call_blocks``), prepared for its registered buffers
        or made for a captured call's (a graph keeps its arguments), and the call's windows tag, which its kernel
        compares with the peers' (``fingerprint.windows_tag``: the registrations, and whether the call is in place
        where that moves where peers find its bytes); None when it runs staged."""
        found = self._zero_copy_windows(call)
        if found is None:
            return None
        wanted, windows = found
        blocks = call_blocks(self.blocks, call.message_bytes, self.copies)
        if windows is None:
            windows = self.windows.capture(self.name, wanted)
            launch = self._new_launch(windows, blocks)
        else:
            launch = self._zero_copy.get(windows, lambda mapped: self._new_launch(mapped, blocks), blocks)
        in_place = call.in_place and self.in_place_moves_bytes
        return launch, windows_tag(self.collective, [w.serial for w in windows], in_place)

    def launch(self, call: Call) -> None:
        found = self._zero_copy_launch(call)
        if found is None:
            super().launch(call)
            return
        launch, tag = found
        self.ran(launch)
        launch_call(launch, call, lambda prepared, c: self._bind_zero_copy(prepared, c, tag))

    def _bind_zero_copy(self, launch: Launch, call: Call, tag: int) -> None:
        self.bind_zero_copy(launch, call)
        launch.set_int("fingerprint", zero_copy(self.check.fingerprint(call), self.pushes))
        launch.set_int("windows", tag)
        launch.set_int("nbytes", call.peer_bytes)


class ZeroCopyReduce(ZeroCopy):
    """A reducing zero-copy family: its kernel also takes the call's dtype and op."""

    copies = False

    def param_values(self, call: Call) -> tuple:
        return (red.DTYPE_KINDS[call.dtype], red.OPS[call.op])

    def bind_zero_copy(self, launch: Launch, call: Call) -> None:
        launch.set_int("kind", red.DTYPE_KINDS[call.dtype])
        launch.set_int("op", red.OPS[call.op])
