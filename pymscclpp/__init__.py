"""pymscclpp: GPU collective communication in pure Python on numba-cuda, after MSCCL++.

Importing it only chooses the backend (so ``numba.cuda`` loads in the right mode afterwards) and keys the kernel
cache by the device code; the Communicator, the DSL, the executor and the integrations load on first use.
"""

__version__ = "0.1.0"

from typing import TYPE_CHECKING, Any

from .runtime import backend as _backend  # chooses gpu/sim (re-imports numba.cuda as the simulator if needed)
from .runtime import kernel_cache as _kernel_cache
from .errors import (BackendError, BootstrapError, CallMismatchError, CommAbortedError, CommTimeoutError,
                     InvalidUsageError, PeerDisconnectedError, PymscclppError, RegistrationError)

if TYPE_CHECKING:  # what __getattr__ loads on first use, for type checkers
    from .communicator import Communicator
    from .runtime.bootstrap import UniqueId, get_unique_id
    from .runtime.memory import alloc, view_as

BACKEND = _backend.BACKEND
# every file whose code ends up in a compiled kernel, or whose constants do: what kept kernels are keyed by
_DEVICE_SOURCES = ("channels", "algos", "callcheck", "executor/device.py", "executor/codegen.py",
                   "runtime/device_errors.py", "runtime/fifo.py", "bench/memory_channel.py", "bench/port_channel.py")
_kernel_cache.configure(_DEVICE_SOURCES, __version__)  # before any layer defines a cache=True kernel
_LAZY = {"Communicator": "communicator", "UniqueId": "runtime.bootstrap", "get_unique_id": "runtime.bootstrap",
         "alloc": "runtime.memory", "view_as": "runtime.memory"}

__all__ = ["BACKEND", "BackendError", "Communicator", "alloc", "UniqueId", "get_unique_id", "BootstrapError",
           "CallMismatchError", "CommAbortedError", "CommTimeoutError", "InvalidUsageError", "PeerDisconnectedError",
           "PymscclppError", "RegistrationError", "__version__", "view_as"]


def __getattr__(name: str) -> Any:
    """Load the public names that need numba-cuda (or more) when they are first used."""
    if name in _LAZY:
        import importlib
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'pymscclpp' has no attribute {name!r}")
