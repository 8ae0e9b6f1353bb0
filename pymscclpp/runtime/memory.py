"""Device buffers and registered memory: validate user buffers, serialize handles, map peers' memory.

GPU: any ``__cuda_array_interface__`` buffer (numba, cupy, torch) is shared through the 64 bytes
of its allocation's CUDA IPC handle plus an offset. Simulator: memory shared with peers must
live in a POSIX shared-memory segment, which ``alloc`` provides.
"""

from __future__ import annotations

import hashlib
import os
import socket
import struct
from collections import namedtuple

from typing import Any

import numpy as np

from .. import config
from ..errors import InvalidUsageError, RegistrationError
from . import shm, traffic
from .backend import IS_SIM
from .buffers import Buffer, as_bytes, buffer_info

if IS_SIM:
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
else:
    from . import cudadrv


def host_id() -> bytes:
    """16 bytes naming this host (hostname and boot id); PYMSCCLPP_HOST_ID overrides, to fake several hosts."""
    override = config.get("PYMSCCLPP_HOST_ID")
    if override:
        seed = override
    else:
        try:
            with open("/proc/sys/kernel/random/boot_id") as f:
                boot = f.read().strip()
        except OSError:
            boot = ""
        seed = f"{socket.gethostname()}|{boot}"
    return hashlib.sha256(seed.encode()).digest()[:16]


def alloc(nbytes: int) -> Buffer:
    """A zeroed device byte buffer that can be registered and shared with peers on either backend."""
    if nbytes <= 0:
        raise InvalidUsageError(f"alloc({nbytes}): size must be positive")
    if IS_SIM:
        seg = shm.create(nbytes)
        arr = FakeCUDAArray(seg.array)
        arr._pymscclpp_segment = seg  # type: ignore[attr-defined]  # keeps the segment (and its file) alive
        return arr
    from numba import cuda
    buf = cuda.device_array(nbytes, dtype=np.uint8)
    cudadrv.memset(buf.__cuda_array_interface__["data"][0], 0, nbytes)
    return buf


def view_as(u8_array: Buffer, dtype: Any, byte_offset: int = 0, count: int | None = None) -> Buffer:
    """A typed device-array view of part of a uint8 device array (NumPy under the simulator)."""
    dtype = np.dtype(dtype)
    total = (u8_array.shape[0] - byte_offset) // dtype.itemsize if count is None else count
    if IS_SIM:  # a simulator device array: kernels then use it in place (NumPy arguments are copied in/out)
        raw: Any = getattr(u8_array, "_ary", u8_array)
        view = FakeCUDAArray(raw[byte_offset:byte_offset + total * dtype.itemsize].view(dtype))
        segment = getattr(u8_array, "_pymscclpp_segment", None)
        if segment is not None:  # the view keeps the shared segment (and its registration) alive too
            view._pymscclpp_segment = segment  # type: ignore[attr-defined]
        return view
    ptr = u8_array.__cuda_array_interface__["data"][0] + byte_offset
    return cudadrv.device_array(ptr, total * dtype.itemsize, dtype, owner=u8_array)


_WIRE = struct.Struct("<8sHB5x16s16siiiiQQQ64s")
_MAGIC = b"PYMSCRM1"
_VERSION = 1
_KIND_GPU_IPC, _KIND_SHM = 1, 2


class RegisteredMemory:
    """A local device buffer made shareable: ``serialize()`` gives the bytes a peer maps with ``RemoteMemory``."""

    def __init__(self, obj: Buffer, *, job_token: bytes, rank: int, device: int | None = None) -> None:
        self.info = buffer_info(obj, device)
        if self.info.nbytes == 0:
            raise RegistrationError("cannot register an empty buffer")
        self.obj = obj
        self.job_token = job_token
        self.rank = rank
        if IS_SIM:
            found = shm.find(self.info.ptr, self.info.nbytes)
            if found is None:
                raise RegistrationError(
                    "under the simulator, memory shared with peers must come from pymscclpp.alloc() "
                    "(POSIX shared memory); this buffer is process-local")
            seg, self.offset = found
            self._kind, self._handle, self._alloc_size = _KIND_SHM, seg.name.encode(), seg.nbytes
        else:
            _, _, base, size = cudadrv.pointer_info(self.info.ptr)
            self.offset = self.info.ptr - base
            self._kind, self._handle, self._alloc_size = _KIND_GPU_IPC, cudadrv.ipc_handle(base), size
        self.nbytes = self.info.nbytes

    def serialize(self) -> bytes:
        """Fixed-layout bytes describing this memory to a peer of the same job and host."""
        return _WIRE.pack(_MAGIC, _VERSION, self._kind, self.job_token, host_id(), self.rank, os.getpid(),
                          self.info.device, 0, self.nbytes, self.offset, self._alloc_size, self._handle)

    def local_bytes(self) -> Buffer:
        """The registered buffer as a uint8 device array."""
        return as_bytes(self.obj)


PeerMemory = namedtuple("PeerMemory", "dst")
"""A peer's registered buffer as kernels take it: ``dst``, named as a channel handle's, so a kernel reads peers'
buffers alike through either."""


class RemoteMemory:
    """A peer's registered memory mapped into this process, as a uint8 device array."""

    def __init__(self, data: bytes, *, job_token: bytes):
        if len(data) != _WIRE.size:
            raise RegistrationError(f"registered-memory handle of {len(data)} bytes, expected {_WIRE.size}")
        (magic, version, kind, token, host, self.rank, pid, _device, _, self.nbytes, self.offset,
         alloc_size, handle) = _WIRE.unpack(data)
        if magic != _MAGIC or version != _VERSION:
            raise RegistrationError("not a pymscclpp registered-memory handle (bad magic or version)")
        if token != job_token:
            raise RegistrationError(f"handle from rank {self.rank} belongs to another job (job token differs)")
        if host != host_id():
            raise RegistrationError(f"handle from rank {self.rank} was made on another host; memory can only be "
                                    "mapped on the host that registered it (use a PortChannel across hosts)")
        if self.offset + self.nbytes > alloc_size:
            raise RegistrationError(f"handle from rank {self.rank} describes bytes past its allocation")
        expected_kind = _KIND_SHM if IS_SIM else _KIND_GPU_IPC
        if kind != expected_kind:
            raise RegistrationError(f"handle from rank {self.rank} is for the other backend (sim vs gpu)")
        self._handle = handle
        if IS_SIM:
            self._segment = shm.attach(handle.rstrip(b"\0").decode(), alloc_size)
            self.host_array: np.ndarray | None = self._segment.array[self.offset:self.offset + self.nbytes]
            self.array: Buffer = FakeCUDAArray(self.host_array)  # a view of the shared memory above
        else:
            base = cudadrv.ipc_open(handle)
            self.host_array = None
            self.array = cudadrv.device_array(base + self.offset, self.nbytes)
        self._open = True

    def device_view(self) -> Buffer:
        """The mapped memory as kernels take it; on the simulator with ``PYMSCCLPP_TRAFFIC=1`` a view that counts
        the bytes moved through it (``runtime.traffic``)."""
        if IS_SIM and traffic.enabled() and self.host_array is not None:
            return FakeCUDAArray(traffic.counted(self.host_array, self.rank))
        return self.array

    def close(self) -> None:
        """Unmap the peer's memory (arrays viewing it must no longer be used)."""
        if not self._open:
            return
        self._open = False
        self.array = self.host_array = None
        if not IS_SIM:
            cudadrv.ipc_close(self._handle)
