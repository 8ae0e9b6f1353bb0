"""The user-facing Communicator: the runtime one plus collectives (all_reduce, ...) over tuned algorithms.

Buffers are any ``__cuda_array_interface__`` object or torch tensor (numba simulator arrays under
the simulator); every argument is checked before anything is launched.
"""

from __future__ import annotations

from .algos import selector
from .channels import reduce as red
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
        if send.dtype != recv.dtype:
            raise InvalidUsageError(f"{what}: send buffer is {send.dtype} but receive buffer is {recv.dtype}")
        if send.nbytes * recv_factor != recv.nbytes * send_factor:
            raise InvalidUsageError(f"{what}: receive buffer has {recv.count} elements, expected "
                                    f"{send.count * recv_factor // send_factor} for a send buffer of {send.count}")
        return send, recv

    def all_reduce(self, sendbuf, recvbuf=None, op: str = "sum", stream=None, algo: str | None = None) -> None:
        """Reduce ``sendbuf`` over all ranks into ``recvbuf`` (in place when None or the same buffer)."""
        send, recv = self._pair("all_reduce", sendbuf, recvbuf)
        try:
            kind, code = red.dtype_kind(send.dtype), red.op_code(op)
        except ValueError as exc:
            raise InvalidUsageError(f"all_reduce: {exc}") from None
        if send.nbytes == 0:
            return
        out = sendbuf if recvbuf is None else recvbuf
        handle = stream_handle(stream, sendbuf, self.device)
        if self.size == 1:
            if recv.ptr != send.ptr:
                bytes_view(out, recv).copy_to_device(bytes_view(sendbuf, send), stream=as_numba_stream(stream))
            return
        impl = selector.choose(self, "all_reduce", send.nbytes, algo)
        impl.launch(self._device_bytes(sendbuf, send), self._device_bytes(out, recv), send.nbytes, kind, code, handle)

    @staticmethod
    def _device_bytes(obj, info) -> tuple:
        """(address, array) of a validated buffer: kernels on GPUs need only the address."""
        return (info.ptr, bytes_view(obj, info) if IS_SIM else None)
