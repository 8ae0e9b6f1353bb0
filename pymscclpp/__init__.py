"""pymscclpp: GPU collective communication in pure Python on numba-cuda, after MSCCL++."""

__version__ = "0.1.0"

from .runtime import backend as _backend  # chooses gpu/sim (re-imports numba.cuda as the simulator if needed)
from .errors import (BackendError, BootstrapError, CommTimeoutError, InvalidUsageError,
                     PeerDisconnectedError, PymscclppError, RegistrationError)

from .communicator import Communicator
from .runtime.bootstrap import UniqueId, get_unique_id
from .runtime.memory import alloc

BACKEND = _backend.BACKEND

__all__ = ["BACKEND", "BackendError", "Communicator", "alloc", "UniqueId", "get_unique_id", "BootstrapError",
           "CommTimeoutError", "InvalidUsageError", "PeerDisconnectedError", "PymscclppError", "RegistrationError",
           "__version__"]
