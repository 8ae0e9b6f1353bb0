"""What your own kernel algorithm needs, in one public place (``docs/api.md``): ``KernelAlgorithm`` and the
``Call`` it launches, the call check (``callcheck(comm).verdict`` in set-up, ``call_agreed(verdict)`` first in
the kernel), ``Launch`` (a kernel prepared once, relaunched per call), memory, and the call's buffers.

A call's buffers are bytes: ``call.send``/``call.recv`` are ``CallBuffer``s (device address ``ptr``; ``array``, the
bytes under the simulator, None on the GPU).
``send_view``/``recv_view`` give typed device arrays of them; ``set_buffers`` points a launch's byte slots at
them, and a kernel reads a byte slot as its dtype with ``buf.view(np.float32)``.
"""

from __future__ import annotations

import numpy as np

from .algos.algorithm import ANY, IN_PLACE, OUT_OF_PLACE, Algorithm, Call, CallBuffer, Constraint
from .callcheck.area import callcheck
from .callcheck.device import call_agreed
from .algos.kernel_algorithm import KernelAlgorithm
from .channels import memory_channel, primitives
from .runtime.backend import IS_SIM
from .runtime.launch import Launch
from .runtime.memory import alloc, view_as

__all__ = ["ANY", "IN_PLACE", "OUT_OF_PLACE", "Algorithm", "Call", "CallBuffer", "Constraint", "KernelAlgorithm", "Launch",
           "alloc", "call_agreed", "callcheck", "memory_channel", "primitives", "recv_bytes", "recv_view",
           "send_bytes", "send_view", "set_buffers", "view_as"]


def send_bytes(call: Call) -> int:
    """Bytes of the call's send buffer (all_gather: one rank's part; the others: the whole message)."""
    return call.peer_bytes if call.collective == "all_gather" else call.message_bytes


def recv_bytes(call: Call) -> int:
    """Bytes of the call's receive buffer (reduce_scatter: one rank's part; the others: the whole message)."""
    return call.peer_bytes if call.collective == "reduce_scatter" else call.message_bytes


def _view(buf: CallBuffer, nbytes: int, dtype):
    dtype = np.dtype(dtype)
    if IS_SIM:
        return view_as(buf.array, dtype, 0, nbytes // dtype.itemsize)
    from .runtime import cudadrv
    return cudadrv.device_array(buf.ptr, nbytes, dtype)


def send_view(call: Call, dtype=None):
    """The call's send buffer as a device array of ``dtype`` (default: the call's)."""
    return _view(call.send, send_bytes(call), dtype or call.dtype)


def recv_view(call: Call, dtype=None):
    """The call's receive buffer as a device array of ``dtype`` (default: the call's)."""
    return _view(call.recv, recv_bytes(call), dtype or call.dtype)


def set_buffers(launch: Launch, call: Call, send: str = "inp", recv: str = "out") -> None:
    """Point byte slots ``send`` and ``recv`` of ``launch`` at the call's buffers."""
    launch.set_buffer(send, call.send.ptr, send_bytes(call), call.send.array)
    launch.set_buffer(recv, call.recv.ptr, recv_bytes(call), call.recv.array)
