"""The user-facing Communicator: the runtime one plus collectives (all_reduce, all_gather, reduce_scatter,
broadcast, all_to_all) over tuned algorithms.

Buffers are any ``__cuda_array_interface__`` object or torch tensor (numba simulator arrays under
the simulator); every argument is checked before anything is launched.
"""

from __future__ import annotations

import numbers

from .algos import selector
from .channels import reduce as red
from .fallback import nccl as nccl_fallback
from .errors import InvalidUsageError
from .runtime.communicator import Communicator as _RuntimeCommunicator
from .runtime.memory import buffer_info, bytes_view
from .runtime.backend import IS_SIM
from .runtime.streams import as_numba_stream, stream_handle


class Communicator(_RuntimeCommunicator):
    """A communicator with collectives; build it with ``from_mpi``, ``from_unique_id`` or ``from_env``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._algos: dict = {}
        self._table = None  # the selection table, read on first use

    def _pair(self, what: str, sendbuf, recvbuf, recv_factor: int = 1, send_factor: int = 1):
        """Validated (send, recv) infos: recv holds ``recv_factor / send_factor`` times the send bytes."""
        send = buffer_info(sendbuf, self.device)
        recv = send if recvbuf is None or recvbuf is sendbuf else buffer_info(recvbuf, self.device)
        if send.count % send_factor:
            raise InvalidUsageError(f"{what}: send buffer of {send.count} elements does not split into "
                                    f"{send_factor} equal slots")
        if send.dtype != recv.dtype:
            raise InvalidUsageError(f"{what}: send buffer is {send.dtype} but receive buffer is {recv.dtype}")
        if send.nbytes * recv_factor != recv.nbytes * send_factor:
            raise InvalidUsageError(f"{what}: receive buffer has {recv.count} elements, expected "
                                    f"{send.count * recv_factor // send_factor} for a send buffer of {send.count}")
        return send, recv

    def _nccl(self, what: str, exc: ValueError, dtype: str, op: str):
        """The NCCL fallback for a call pymscclpp cannot serve, after checking NCCL could; else the error."""
        if op not in nccl_fallback.OPS or dtype not in nccl_fallback.DTYPES:
            raise InvalidUsageError(f"{what}: {exc}") from None
        impl = nccl_fallback.fallback_for(self)
        if impl is None:
            raise nccl_fallback.missing(f"{what} of {dtype} with op {op!r}", str(exc)) from None
        return impl

    def all_reduce(self, sendbuf, recvbuf=None, op: str = "sum", stream=None, algo: str | None = None) -> None:
        """Reduce ``sendbuf`` over all ranks into ``recvbuf`` (in place when None or the same buffer)."""
        send, recv = self._pair("all_reduce", sendbuf, recvbuf)
        try:
            kind, code = red.dtype_kind(send.dtype), red.op_code(op)
        except ValueError as exc:  # a dtype or op pymscclpp has no algorithm for: NCCL serves it
            self._nccl("all_reduce", exc, send.dtype, op).all_reduce(
                send.ptr, recv.ptr, send.count, send.dtype, op, stream_handle(stream, sendbuf, self.device))
            return
        self._run("all_reduce", algo, send.nbytes, send.nbytes, sendbuf, send, recvbuf, recv, stream, kind, code)

    def all_gather(self, sendbuf, recvbuf, stream=None, algo: str | None = None) -> None:
        """Gather every rank's ``sendbuf`` into ``recvbuf`` (``size`` slots, rank r's at slot r); in place when
        ``sendbuf`` is slot ``rank`` of ``recvbuf``."""
        send, recv = self._pair("all_gather", sendbuf, recvbuf, recv_factor=self.size)
        self._check_alias("all_gather", send, recv, self.rank * send.nbytes)
        self._run("all_gather", algo, recv.nbytes, send.nbytes, sendbuf, send, recvbuf, recv, stream)

    def reduce_scatter(self, sendbuf, recvbuf, op: str = "sum", stream=None, algo: str | None = None) -> None:
        """Reduce slot r of every rank's ``sendbuf`` (``size`` slots) into rank r's ``recvbuf``, in rank order;
        in place when ``recvbuf`` is slot ``rank`` of ``sendbuf``."""
        send, recv = self._pair("reduce_scatter", sendbuf, recvbuf, send_factor=self.size)
        try:
            kind, code = red.dtype_kind(send.dtype), red.op_code(op)
        except ValueError as exc:
            self._nccl("reduce_scatter", exc, send.dtype, op).reduce_scatter(
                send.ptr, recv.ptr, recv.count, send.dtype, op, stream_handle(stream, sendbuf, self.device))
            return
        self._check_alias("reduce_scatter", recv, send, self.rank * recv.nbytes)
        self._run("reduce_scatter", algo, send.nbytes, recv.nbytes, sendbuf, send, recvbuf, recv, stream, kind, code)

    def all_to_all(self, sendbuf, recvbuf=None, stream=None, algo: str | None = None) -> None:
        """Send slot j of ``sendbuf`` (``size`` equal slots) to rank j's ``recvbuf`` slot ``rank`` (in place
        when ``recvbuf`` is None or ``sendbuf``)."""
        send, recv = self._pair("all_to_all", sendbuf, recvbuf, send_factor=self.size, recv_factor=self.size)
        self._check_alias("all_to_all", send, recv, 0)
        self._run("all_to_all", algo, send.nbytes, send.nbytes // self.size, sendbuf, send, recvbuf, recv, stream)

    def broadcast(self, sendbuf, recvbuf=None, root: int | None = None, stream=None, algo: str | None = None) -> None:
        """Copy rank ``root``'s buffer to every rank: ``broadcast(buf, root)`` in place, or
        ``broadcast(sendbuf, recvbuf, root)`` (only the root's ``sendbuf`` is read)."""
        if root is None and isinstance(recvbuf, numbers.Integral):
            recvbuf, root = None, recvbuf
        send, recv = self._pair("broadcast", sendbuf, recvbuf)
        if not isinstance(root, numbers.Integral) or isinstance(root, bool) or not 0 <= root < self.size:
            raise InvalidUsageError(f"broadcast: root must be a rank in [0, {self.size}), got {root!r}")
        self._check_alias("broadcast", send, recv, 0)
        self._run("broadcast", algo, send.nbytes, send.nbytes, sendbuf, send, recvbuf, recv, stream, int(root))

    def _check_alias(self, what: str, inner, outer, offset: int) -> None:
        """Raise unless ``inner`` is disjoint from ``outer`` or exactly its bytes from ``offset`` (in place)."""
        if inner.nbytes == 0 or inner.ptr == outer.ptr + offset:
            return
        if inner.ptr < outer.ptr + outer.nbytes and outer.ptr < inner.ptr + inner.nbytes:
            where = "the same buffer" if inner.nbytes == outer.nbytes else f"slot {self.rank} of the larger one"
            raise InvalidUsageError(f"{what}: send and receive buffers overlap; in place, pass {where}")

    def _run(self, collective: str, algo, select_bytes: int, nbytes: int, sendbuf, send, recvbuf, recv, stream,
             *params: int) -> None:
        """Launch ``collective`` on checked buffers moving ``nbytes`` per slot (a copy on one rank)."""
        if nbytes == 0:
            return
        out = sendbuf if recvbuf is None else recvbuf
        handle = stream_handle(stream, sendbuf, self.device)
        if self.size == 1:
            if recv.ptr != send.ptr:
                bytes_view(out, recv).copy_to_device(bytes_view(sendbuf, send), stream=as_numba_stream(stream))
            return
        impl = selector.choose(self, collective, select_bytes, algo)
        impl.launch(self._device_bytes(sendbuf, send), self._device_bytes(out, recv), nbytes, handle, *params)

    @staticmethod
    def _device_bytes(obj, info) -> tuple:
        """(address, array) of a validated buffer: kernels on GPUs need only the address."""
        return (info.ptr, bytes_view(obj, info) if IS_SIM else None)
