"""``NcclCommunicator``: cupy.cuda.nccl's communicator, served by pymscclpp's collectives, else by NCCL."""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from ..channels import reduce as red
from ..communicator import Communicator, serves_reduction
from ..errors import InvalidUsageError
from ..fallback import nccl as fb
from ..runtime.buffers import stream_handle
from . import ids
from .buffers import device_buffer, typed
from .constants import datatype_name, op_name
from .group import Call, submit, submit_served

_REDUCES = f"pymscclpp reduces {', '.join(red.DTYPE_KINDS)} with {', '.join(red.OPS)}"


_SERVED_CALLS = 64  # repeatable calls remembered per communicator


def _repeatable(*args) -> tuple | None:
    """The key of a call whose buffers, counts, constants and stream are plain ints (cupy's raw-pointer API), by
    which a repeat skips its checks; None for calls on arrays or stream objects, checked in full every time."""
    for arg in args[1:]:  # a loop, not all(generator): this runs on every call
        if type(arg) is not int:
            return None
    return args


def _common(datatype: int, count, stream, what: str = "count") -> tuple[str, int, int]:
    """(dtype name, count, raw stream handle) of a call's common arguments, checked."""
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
        raise InvalidUsageError(f"{what}={count!r}: expected a number of elements >= 0")
    return datatype_name(datatype), int(count), stream_handle(stream)


class NcclCommunicator:
    """One rank of ``ndev`` (one GPU per process), joined through ``commId`` from ``get_unique_id()``.

    Buffers are raw device pointers (ints, as in cupy) or device arrays; counts are in elements;
    ``stream`` is a raw handle (0: the default stream) or a stream object.
    """

    def __init__(self, ndev: int, commId, rank: int):  # noqa: N803 (cupy's names)
        self._comm: Communicator | None = Communicator.from_unique_id(ids.decode(commId), rank, ndev)
        self._served: dict[tuple, Callable[[], None]] = {}  # a call on raw pointers -> its checked issue

    @staticmethod
    def initAll(devices):  # noqa: N802
        """Not supported: pymscclpp runs one process per GPU."""
        raise InvalidUsageError("NcclCommunicator.initAll (several GPUs in one process) is not supported: run one "
                                "process per GPU, each making NcclCommunicator(ndev, commId, rank)")

    @property
    def communicator(self) -> Communicator:
        """The pymscclpp Communicator underneath."""
        if self._comm is None:
            raise InvalidUsageError("this NcclCommunicator was destroyed")
        return self._comm

    def rank_id(self) -> int:
        return self.communicator.rank

    def device_id(self) -> int:
        return self.communicator.device

    def size(self) -> int:
        return self.communicator.size

    def destroy(self) -> None:
        """Release the communicator (and its NCCL one, if made); idempotent."""
        if self._comm is not None:
            comm, self._comm = self._comm, None
            self._served.clear()
            comm.close()

    def abort(self) -> None:
        """Abort the NCCL communicator (if made) without waiting for its work, then release everything."""
        nccl = None if self._comm is None else self._comm.extension(fb.EXTENSION)
        if nccl is not None:
            nccl.close(abort=True)
        self.destroy()

    def check_async_error(self) -> None:
        """Raise if a device wait of a finished collective timed out."""
        self.communicator.check_device_errors()

    # -- collectives ----------------------------------------------------------------------------
    def allReduce(self, sendbuf, recvbuf, count: int, datatype: int, op: int, stream=0) -> None:  # noqa: N802
        key = _repeatable("allReduce", sendbuf, recvbuf, count, datatype, op, stream)
        if self._repeat(key):
            return
        (dtype, count, stream), opname = _common(datatype, count, stream), op_name(op)
        send = device_buffer(sendbuf, count, dtype, "sendbuf")
        same = key is not None and recvbuf == sendbuf  # in place on one raw pointer: check it once
        recv = send if same else device_buffer(recvbuf, count, dtype, "recvbuf")
        if self._reduces(dtype, opname):
            out = None if recv.ptr == send.ptr else recv.obj
            self._serve(key, lambda: self.communicator.all_reduce(send.obj, out, op=opname, stream=stream))
        else:
            nccl = self._nccl(f"allReduce of {dtype} with {opname}", _REDUCES)
            submit(Call(lambda: nccl.all_reduce(send.ptr, recv.ptr, count, dtype, opname, stream), nccl))

    def allGather(self, sendbuf, recvbuf, count: int, datatype: int, stream=0) -> None:  # noqa: N802
        key = _repeatable("allGather", sendbuf, recvbuf, count, datatype, 0, stream)
        if self._repeat(key):
            return
        dtype, count, stream = _common(datatype, count, stream)
        send = device_buffer(sendbuf, count, dtype, "sendbuf")
        recv = device_buffer(recvbuf, count * self.size(), dtype, "recvbuf")
        self._serve(key, lambda: self.communicator.all_gather(send.obj, recv.obj, stream=stream))

    def reduceScatter(self, sendbuf, recvbuf, recvcount: int, datatype: int, op: int, stream=0) -> None:  # noqa: N802
        key = _repeatable("reduceScatter", sendbuf, recvbuf, recvcount, datatype, op, stream)
        if self._repeat(key):
            return
        (dtype, count, stream), opname = _common(datatype, recvcount, stream, "recvcount"), op_name(op)
        send = device_buffer(sendbuf, count * self.size(), dtype, "sendbuf")
        recv = device_buffer(recvbuf, count, dtype, "recvbuf")
        if self._reduces(dtype, opname):
            self._serve(key, lambda: self.communicator.reduce_scatter(send.obj, recv.obj, op=opname, stream=stream))
        else:
            nccl = self._nccl(f"reduceScatter of {dtype} with {opname}", _REDUCES)
            submit(Call(lambda: nccl.reduce_scatter(send.ptr, recv.ptr, count, dtype, opname, stream), nccl))

    def broadcast(self, sendbuff, recvbuff, count: int, datatype: int, root: int, stream=0) -> None:
        """Root's ``sendbuff`` into every rank's ``recvbuff`` (``sendbuff`` is read on the root only)."""
        key = _repeatable("broadcast", sendbuff, recvbuff, count, datatype, root, stream)
        if self._repeat(key):
            return
        (dtype, count, stream), root = _common(datatype, count, stream), self._rank(root, "root")
        recv = device_buffer(recvbuff, count, dtype, "recvbuff")
        send = device_buffer(sendbuff, count, dtype, "sendbuff") if self.rank_id() == root else recv
        out = None if recv.ptr == send.ptr else recv.obj
        self._serve(key, lambda: self.communicator.broadcast(send.obj, out, root=root, stream=stream))

    def bcast(self, buff, count: int, datatype: int, root: int, stream=0) -> None:
        """In-place broadcast of ``buff`` from ``root``."""
        self.broadcast(buff, buff, count, datatype, root, stream)

    def send(self, sendbuf, count: int, datatype: int, peer: int, stream=0) -> None:
        """Send ``count`` elements to ``peer``, whose ``recv`` takes them (both ways at once: in a group)."""
        (dtype, count, stream), peer = _common(datatype, count, stream), self._rank(peer, "peer")
        buf, comm = device_buffer(sendbuf, count, dtype, "sendbuf"), self.communicator
        submit(Call(lambda: comm.send(buf.obj, peer, stream=stream), None, comm))

    def recv(self, recvbuf, count: int, datatype: int, peer: int, stream=0) -> None:
        """Receive ``count`` elements from ``peer``."""
        (dtype, count, stream), peer = _common(datatype, count, stream), self._rank(peer, "peer")
        buf, comm = device_buffer(recvbuf, count, dtype, "recvbuf"), self.communicator
        submit(Call(lambda: comm.recv(buf.obj, peer, stream=stream), None, comm))

    # -- routing --------------------------------------------------------------------------------
    def _repeat(self, key: tuple | None) -> bool:
        """Issue again a served call made before on the same raw pointers with the same arguments (checked then:
        a pointer's allocation is asked once, as the Communicator asks a buffer's device once)."""
        issue = self._served.get(key) if key is not None else None
        if issue is None:
            return False
        submit_served(issue)
        return True

    def _serve(self, key: tuple | None, issue: Callable[[], None]) -> None:
        """Issue a checked call pymscclpp serves, remembering it for ``_repeat`` when ``key`` is set."""
        if key is not None:
            if len(self._served) >= _SERVED_CALLS:
                del self._served[next(iter(self._served))]
            self._served[key] = issue
        submit_served(issue)

    @staticmethod
    @functools.lru_cache(maxsize=None)
    def _reduces(dtype: str, op: str) -> bool:
        """Whether pymscclpp's reductions serve ``dtype`` and ``op`` (buffers made here must show the dtype)."""
        return serves_reduction(dtype, op) and typed(dtype)

    def _nccl(self, what: str, why: str) -> fb.NcclFallback:
        nccl = fb.fallback_for(self.communicator)
        if nccl is None:
            raise fb.missing(what, why)
        return nccl

    def _rank(self, value, what: str) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < self.size():
            raise InvalidUsageError(f"{what}={value!r}: expected a rank in 0..{self.size() - 1}")
        return int(value)
