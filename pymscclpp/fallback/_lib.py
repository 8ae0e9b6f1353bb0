"""libnccl through ctypes: found in the nvidia-nccl wheel, at PYMSCCLPP_NCCL_LIB, or on the system."""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

from .. import config
from ..errors import PymscclppError

LIB_ENV = "PYMSCCLPP_NCCL_LIB"
UNIQUE_ID_BYTES = 128
_WHEEL_LIB = Path("nvidia", "nccl", "lib", "libnccl.so.2")  # nvidia-nccl-cu12 and -cu13 alike
_P, _S, _I = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int


class UniqueIdStruct(ctypes.Structure):
    """nccl.h's ncclUniqueId: 128 opaque bytes, passed by value."""
    _fields_ = [("internal", ctypes.c_ubyte * UNIQUE_ID_BYTES)]


# argument types of each function used (all return ncclResult_t); comm and stream are pointers
_SIGNATURES = {
    "ncclGetVersion": (ctypes.POINTER(_I),),
    "ncclGetUniqueId": (ctypes.POINTER(UniqueIdStruct),),
    "ncclCommInitRank": (ctypes.POINTER(_P), _I, UniqueIdStruct, _I),
    "ncclCommDestroy": (_P,),
    "ncclCommAbort": (_P,),
    "ncclAllReduce": (_P, _P, _S, _I, _I, _P, _P),
    "ncclAllGather": (_P, _P, _S, _I, _P, _P),
    "ncclReduceScatter": (_P, _P, _S, _I, _I, _P, _P),
    "ncclBroadcast": (_P, _P, _S, _I, _I, _P, _P),
    "ncclSend": (_P, _S, _I, _I, _P, _P),
    "ncclRecv": (_P, _S, _I, _I, _P, _P),
    "ncclGroupStart": (),
    "ncclGroupEnd": (),
}


class NcclError(PymscclppError):
    """An NCCL call failed; ``status`` is its ncclResult_t."""

    def __init__(self, message: str, status: int = -1):
        super().__init__(message)
        self.status = status


def candidates() -> list[str]:
    """Where to look for libnccl, in order: PYMSCCLPP_NCCL_LIB alone if set, else wheels, then the system."""
    explicit = config.get(LIB_ENV)
    if explicit:
        return [explicit]
    wheels = [str(Path(p) / _WHEEL_LIB) for p in dict.fromkeys(sys.path) if p and (Path(p) / _WHEEL_LIB).is_file()]
    return wheels + ["libnccl.so.2"]


class Library:
    """The functions of one loaded libnccl; every call is checked (a failure raises NcclError)."""

    def __init__(self, path: str):
        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # before NCCL reads its environment
        self.path = path
        self._lib = ctypes.CDLL(path)
        for name, argtypes in _SIGNATURES.items():
            fn = getattr(self._lib, name)
            fn.argtypes, fn.restype = argtypes, _I
        self._lib.ncclGetErrorString.argtypes, self._lib.ncclGetErrorString.restype = (_I,), ctypes.c_char_p
        version = _I(0)
        self.call("ncclGetVersion", ctypes.byref(version))
        self.version = version.value

    def call(self, fn: str, *args) -> None:
        """``fn(*args)``, raising NcclError with NCCL's message unless it returns ncclSuccess."""
        status = getattr(self._lib, fn)(*args)
        if status != 0:
            text = (self._lib.ncclGetErrorString(status) or b"unknown error").decode()
            raise NcclError(f"{fn} failed: {text} (ncclResult_t {status})", status)

    def unique_id(self) -> bytes:
        """A fresh ncclUniqueId's 128 bytes."""
        uid = UniqueIdStruct()
        self.call("ncclGetUniqueId", ctypes.byref(uid))
        return bytes(uid.internal)

    def comm_init_rank(self, nranks: int, uid: bytes, rank: int) -> int:
        """An ncclComm_t (as an int) for ``rank`` of ``nranks`` on the current CUDA device."""
        comm = _P()
        self.call("ncclCommInitRank", ctypes.byref(comm), nranks, UniqueIdStruct.from_buffer_copy(uid), rank)
        return comm.value


def load() -> Library:
    """The first candidate that loads; OSError listing every failure otherwise."""
    failures = []
    for path in candidates():
        try:
            return Library(path)
        except (OSError, AttributeError, NcclError) as exc:  # AttributeError: a libnccl lacking a function
            failures.append(f"{path}: {exc}")
    raise OSError("; ".join(failures))
