"""A drop-in for ``cupy.cuda.nccl``'s communicator API: change the import, keep the code.

Collectives pymscclpp covers run on its algorithms; the rest (float64, avg, send/recv, ...) run on
NCCL when it is installed (``pip install nvidia-nccl-cu13``). One process per GPU.
"""

from ..fallback import nccl as _fb
from ..fallback.nccl import NcclError
from .communicator import NcclCommunicator
from .constants import *  # noqa: F403 (the NCCL_* constants)
from .constants import __all__ as _constants
from .group import groupEnd, groupStart
from .ids import get_unique_id

API_VERSION = 21000  # the NCCL API level mirrored here (2.10: bfloat16, avg)
available = True  # like cupy.cuda.nccl.available: the collectives work without NCCL too


def get_version() -> int:
    """The loaded NCCL's version code, or ``API_VERSION`` when NCCL is not available."""
    return _fb.library().version if _fb.available() else API_VERSION


__all__ = ["API_VERSION", "NcclCommunicator", "NcclError", "available", "get_unique_id", "get_version",
           "groupEnd", "groupStart", *_constants]
