"""NCCL as a fallback for calls no pymscclpp algorithm covers (float64, avg, send/recv, ...).

``fallback_for(comm)`` gives the communicator's ``NcclFallback`` (None when NCCL cannot run here);
its NCCL communicator is made on first use, which every rank must take part in.
"""

from __future__ import annotations

from ..errors import CommTimeoutError, InvalidUsageError
from ..runtime.backend import IS_SIM
from . import _lib
from ._lib import LIB_ENV, Library, NcclError

# nccl.h's ncclDataType_t and ncclRedOp_t values, by pymscclpp dtype and op name
DTYPES = {"int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5, "float16": 6,
          "float32": 7, "float64": 8, "bfloat16": 9, "float8_e4m3": 10, "float8_e4m3fn": 10, "float8_e5m2": 11}
OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
INSTALL_HINT = f"pip install nvidia-nccl-cu13 (nvidia-nccl-cu12 for CUDA 12), or set {LIB_ENV} to libnccl.so.2's path"

EXTENSION = "nccl_fallback"  # the communicator extension holding a communicator's NcclFallback
_LOADED: tuple[Library | None, str] | None = None  # (library, why not) once looked for


class NcclUnavailableError(InvalidUsageError):
    """A call needs NCCL (no pymscclpp algorithm serves it) but NCCL cannot be used in this process."""


def _load() -> tuple[Library | None, str]:
    global _LOADED
    if _LOADED is None:
        if IS_SIM:
            _LOADED = (None, "NCCL needs real GPUs and this process runs on the CUDA simulator")
        else:
            try:
                _LOADED = (_lib.load(), "")
            except OSError as exc:
                _LOADED = (None, f"libnccl.so.2 was not found or failed to load ({exc}); {INSTALL_HINT}")
    return _LOADED


def available() -> bool:
    """True when libnccl is loaded and usable here (real GPUs, not the simulator)."""
    return _load()[0] is not None


def missing(what: str, why: str = "") -> NcclUnavailableError:
    """The error for ``what``, which only NCCL could serve (``why``: what pymscclpp serves instead), when NCCL is
    unavailable: first that pymscclpp does not serve it and what it serves, then why no fallback is there."""
    if why:
        return NcclUnavailableError(f"pymscclpp does not serve {what} ({why}); NCCL, which could, cannot be used: "
                                    f"{_load()[1]}")
    return NcclUnavailableError(f"{what} needs NCCL, which cannot be used: {_load()[1]}")


def library(what: str = "this call") -> Library:
    """The loaded libnccl, or NcclUnavailableError naming ``what`` needed it and how to install NCCL."""
    lib = _load()[0]
    if lib is None:
        raise missing(what)
    return lib


def dtype_code(dtype: str) -> int:
    """NCCL's code of a dtype name."""
    if dtype not in DTYPES:
        raise InvalidUsageError(f"NCCL has no dtype {dtype!r}: supported are {', '.join(DTYPES)}")
    return DTYPES[dtype]


def op_code(op: str) -> int:
    """NCCL's code of a reduction op name."""
    if op not in OPS:
        raise InvalidUsageError(f"NCCL has no reduction op {op!r}: supported are {', '.join(OPS)}")
    return OPS[op]


def group_start() -> None:
    """ncclGroupStart: NCCL calls until ``group_end`` are issued together (send/recv pairs need it)."""
    library("ncclGroupStart").call("ncclGroupStart")


def group_end() -> None:
    """ncclGroupEnd."""
    library("ncclGroupEnd").call("ncclGroupEnd")


class NcclFallback:
    """An NCCL communicator over the ranks of a pymscclpp Communicator; pointers are raw device addresses,
    counts are in elements, streams are raw handles (0: the default stream)."""

    def __init__(self, comm):
        self.comm = comm
        self._handle: int | None = None

    def ready(self) -> int:
        """The ncclComm_t, made now if needed: rank 0's ncclUniqueId goes to all ranks over the bootstrap."""
        if self._handle is None:
            lib = library("creating an NCCL communicator")
            mine = lib.unique_id() if self.comm.rank == 0 else b""
            try:
                uid = self.comm.bootstrap.all_gather(mine, what="the NCCL unique id")[0]
            except CommTimeoutError as exc:
                raise CommTimeoutError(f"{exc}: the first call that needs NCCL creates its communicator, "
                                       "so every rank must make it") from exc
            if len(uid) != _lib.UNIQUE_ID_BYTES:
                raise NcclError(f"rank 0 sent an ncclUniqueId of {len(uid)} bytes, expected {_lib.UNIQUE_ID_BYTES}")
            if not IS_SIM:
                from ..runtime import cudadrv
                cudadrv.ensure_context()  # NCCL uses the current device: the communicator's
            self._handle = lib.comm_init_rank(self.comm.size, uid, self.comm.rank)
        return self._handle

    def _call(self, fn: str, *args, stream: int) -> None:
        library(fn).call(fn, *args, self.ready(), stream)

    def all_reduce(self, send_ptr: int, recv_ptr: int, count: int, dtype: str, op: str, stream: int = 0) -> None:
        """ncclAllReduce of ``count`` elements."""
        self._call("ncclAllReduce", send_ptr, recv_ptr, count, dtype_code(dtype), op_code(op), stream=stream)

    def all_gather(self, send_ptr: int, recv_ptr: int, count: int, dtype: str, stream: int = 0) -> None:
        """ncclAllGather: ``count`` elements from each rank, ``count * size`` received."""
        self._call("ncclAllGather", send_ptr, recv_ptr, count, dtype_code(dtype), stream=stream)

    def reduce_scatter(self, send_ptr: int, recv_ptr: int, recv_count: int, dtype: str, op: str,
                       stream: int = 0) -> None:
        """ncclReduceScatter: ``recv_count * size`` elements sent, ``recv_count`` received."""
        self._call("ncclReduceScatter", send_ptr, recv_ptr, recv_count, dtype_code(dtype), op_code(op), stream=stream)

    def broadcast(self, send_ptr: int, recv_ptr: int, count: int, dtype: str, root: int, stream: int = 0) -> None:
        """ncclBroadcast of ``count`` elements from ``root``'s ``send_ptr`` into every ``recv_ptr``."""
        self._call("ncclBroadcast", send_ptr, recv_ptr, count, dtype_code(dtype), root, stream=stream)

    def send(self, ptr: int, count: int, dtype: str, peer: int, stream: int = 0) -> None:
        """ncclSend to ``peer`` (pair it with the peer's ``recv``, in a group when both ways)."""
        self._call("ncclSend", ptr, count, dtype_code(dtype), peer, stream=stream)

    def recv(self, ptr: int, count: int, dtype: str, peer: int, stream: int = 0) -> None:
        """ncclRecv from ``peer``."""
        self._call("ncclRecv", ptr, count, dtype_code(dtype), peer, stream=stream)

    def close(self, abort: bool = False) -> None:
        """Destroy (or abort) the NCCL communicator, if one was made; idempotent."""
        if self._handle is not None:
            handle, self._handle = self._handle, None
            library().call("ncclCommAbort" if abort else "ncclCommDestroy", handle)


def fallback_for(comm) -> NcclFallback | None:
    """``comm``'s NCCL fallback (one per communicator, closed with it), or None when NCCL cannot run here."""
    if not available():
        return None
    return comm.extension(EXTENSION, NcclFallback)
