"""The built-in entry kernels a communicator on one host compiles, one per family and protocol (and the exchange
kernel of the verbs): what ``python -m pymscclpp.precompile`` builds."""

from __future__ import annotations

from . import exchange
from .counts_oneshot import AllToAllvOneShot
from .counts_read import AllToAllvRead
from .oneshot import BY_COLLECTIVE
from .push import PUSH
from .twoshot import TWO_STEP
from .twoshot_packet import AllReduceTwoShotPacket, BroadcastTwoStepPacket


def entry_kernels(nranks: int) -> dict[str, tuple]:
    """(entry kernel, argument types) by kernel name of every built-in kernel a communicator of ``nranks`` ranks
    (on one host) compiles, whatever the dtype, op, grid or buffers."""
    classes = [*BY_COLLECTIVE.values(), *TWO_STEP.values(), *PUSH.values(), AllReduceTwoShotPacket,
               BroadcastTwoStepPacket, AllToAllvOneShot, AllToAllvRead]
    out = {kernel.py_func.__name__: (kernel, cls.argtypes(nranks))
           for cls in classes for kernel in cls.kernels.values()}
    for cls in classes:
        kernel = getattr(cls, "zero_copy_kernel", None)  # the zero-copy families' (``zero_copy``)
        if kernel is not None:
            out[kernel.py_func.__name__] = (kernel, cls.zero_copy_argtypes(nranks))
    # the verbs; every pair zero-copy; a reduce
    for kernel in (exchange.peer_exchange_simple, exchange.peer_read_simple, exchange.peer_reduce_simple):
        out[kernel.py_func.__name__] = (kernel, exchange.argtypes(nranks))
    return out
