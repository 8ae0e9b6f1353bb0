"""A prepared launch whose per-call arguments (user buffers, sizes) are patched in place, not re-flattened.

Built on the executor's ``PreparedLaunch``: the constant arguments (channel handles, scratch, flags)
are flattened once; each call rewrites the few ctypes values of the byte buffers and integers that
change, then issues ``cuLaunchKernel`` on the caller's stream (~µs, capturable in a CUDA graph).
"""

from __future__ import annotations

from ..executor.launch import PreparedLaunch, _flatten
from ..runtime.backend import IS_SIM


class PatchableLaunch(PreparedLaunch):
    """``PreparedLaunch`` plus ``set_bytes(i, ptr, nbytes)`` and ``set_int(i, value)`` for argument ``i``."""

    def __init__(self, kernel, griddim: int, blockdim: int, args: tuple):
        super().__init__(kernel, griddim, blockdim, args)
        self._pos: list[int] = []
        if IS_SIM or self._use_numba:
            self._live = list(args)
            return
        pos = 0
        compiled = kernel.compile(tuple(kernel.typeof_pyval(a) for a in self.args))
        for ty, val in zip(compiled.argument_types, self.args):
            self._pos.append(pos)
            scratch: list = []
            _flatten(ty, val, scratch)
            pos += len(scratch)

    def set_bytes(self, i: int, ptr: int, nbytes: int, array=None) -> None:
        """Argument ``i`` (a 1-D uint8 array) now views ``nbytes`` at device address ``ptr``; the
        simulator, which has no addresses, takes the array itself."""
        if self._pos:
            base = self._pos[i]
            self._values[base + 2].value = nbytes  # nitems
            self._values[base + 4].value = ptr
            self._values[base + 5].value = nbytes  # shape[0]; the stride stays 1
        else:
            self._live[i] = array

    def set_int(self, i: int, value: int) -> None:
        """Integer argument ``i`` is now ``value``."""
        if self._pos:
            self._values[self._pos[i]].value = value
        else:
            self._live[i] = value

    def launch(self, stream: int = 0) -> None:
        if self._pos:
            super().launch(stream)
            return
        self.args = tuple(self._live)
        super().launch(stream)
