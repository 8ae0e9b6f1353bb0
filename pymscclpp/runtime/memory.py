"""Device buffers and registered memory: validate user buffers, serialize handles, map peers' memory.

GPU: any ``__cuda_array_interface__`` buffer (numba, cupy, torch) is shared through the 64 bytes
of its allocation's CUDA IPC handle plus an offset. Simulator: memory shared with peers must
live in a POSIX shared-memory segment, which ``alloc`` provides.
"""

from __future__ import annotations

import hashlib
import math
import os
import socket
import struct
from typing import NamedTuple

import numpy as np

from ..errors import InvalidUsageError, RegistrationError
from . import shm
from .backend import IS_SIM

if IS_SIM:
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
else:
    from . import cudadrv


def host_id() -> bytes:
    """16 bytes naming this host (hostname and boot id); PYMSCCLPP_HOST_ID overrides, to fake several hosts."""
    override = os.environ.get("PYMSCCLPP_HOST_ID")
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


class BufferInfo(NamedTuple):
    """A validated contiguous device buffer; ``dtype`` is a name (``float32``, ``bfloat16``, ...)."""
    ptr: int
    nbytes: int
    dtype: str
    shape: tuple
    device: int

    @property
    def count(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)


def _c_contiguous(shape, strides, itemsize) -> bool:
    expected = itemsize
    for dim, stride in zip(reversed(shape), reversed(strides)):
        if dim != 1 and stride != expected:
            return False
        expected *= dim
    return True


def _sim_array(obj) -> np.ndarray:
    if isinstance(obj, FakeCUDAArray):
        return obj._ary
    if type(obj).__module__.split(".")[0] == "torch" and hasattr(obj, "data_ptr"):
        return _sim_torch_array(obj)
    if isinstance(obj, np.ndarray):
        raise InvalidUsageError("expected device memory, got a NumPy array (host memory); "
                                "copy it to the device first (numba.cuda.to_device or pymscclpp.alloc)")
    raise InvalidUsageError(f"expected a device array, got {type(obj).__name__}")


def _sim_torch_array(t) -> np.ndarray:
    """The memory of a CPU torch tensor as a NumPy array: under the simulator, CPU tensors stand in for CUDA ones
    (enough for collectives on user buffers; memory shared with peers must still come from ``alloc``)."""
    if t.device.type != "cpu":
        raise InvalidUsageError(f"under the simulator, torch tensors must be on the CPU, got one on {t.device}")
    t = t.detach()
    if str(t.dtype) == "torch.bfloat16":  # NumPy has no bfloat16: view the bits through ml_dtypes'
        import ml_dtypes
        import torch
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def buffer_info(obj, device: int | None = None) -> BufferInfo:
    """Validate ``obj`` as a contiguous device buffer (on ``device`` if given) and describe it."""
    if IS_SIM:
        arr = _sim_array(obj)
        if not arr.flags.c_contiguous:
            raise InvalidUsageError(f"buffer of shape {arr.shape} with strides {arr.strides} is not "
                                    "contiguous; pass a contiguous array (e.g. a copy)")
        return BufferInfo(arr.ctypes.data, arr.nbytes, arr.dtype.name, arr.shape, 0)
    if type(obj).__module__.split(".")[0] == "torch" and hasattr(obj, "data_ptr"):
        return _torch_info(obj, device)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is None:
        if isinstance(obj, np.ndarray) or (hasattr(obj, "__dlpack_device__") and obj.__dlpack_device__()[0] == 1):
            raise InvalidUsageError(f"expected GPU memory, got host memory ({type(obj).__name__}); "
                                    "move it to the GPU first")
        raise InvalidUsageError(f"{type(obj).__name__} has no __cuda_array_interface__: pass a numba, "
                                "cupy or torch GPU array")
    typestr = cai["typestr"]
    dtype = _DTYPES.get(typestr)
    if dtype is None:
        dtype = _DTYPES[typestr] = np.dtype(typestr)
    shape = tuple(cai["shape"])
    strides = cai.get("strides")
    if strides is not None and not _c_contiguous(shape, strides, dtype.itemsize):
        raise InvalidUsageError(f"buffer of shape {shape} with strides {tuple(strides)} is not contiguous; "
                                "pass a contiguous array (e.g. .contiguous() or a copy)")
    ptr = int(cai["data"][0])
    nbytes = math.prod(shape) * dtype.itemsize
    return _checked(ptr, nbytes, dtype.name, shape, device)


_DTYPES: dict[str, np.dtype] = {}  # CUDA-array-interface typestr -> dtype, parsed once
_device_of: dict[tuple[int, int], int] = {}  # (address, bytes) -> device ordinal, for buffers seen before


def _checked(ptr: int, nbytes: int, dtype: str, shape: tuple, device: int | None) -> BufferInfo:
    """BufferInfo of GPU memory at ``ptr``, after checking it is device memory on ``device``."""
    if nbytes == 0:
        return BufferInfo(ptr, 0, dtype, shape, -1 if device is None else device)
    ordinal = _device_of.get((ptr, nbytes))
    if ordinal is None:  # ask the driver once per buffer: collectives are called on the same buffers
        kind, ordinal, _, _ = cudadrv.pointer_info(ptr)
        if kind != "device":
            raise InvalidUsageError(f"expected GPU device memory, got {kind} memory at {ptr:#x}")
        if len(_device_of) > 4096:
            _device_of.clear()
        _device_of[(ptr, nbytes)] = ordinal
    if device is not None and ordinal != device:
        raise InvalidUsageError(f"buffer is on GPU {ordinal}, but this communicator uses GPU {device}")
    return BufferInfo(ptr, nbytes, dtype, shape, ordinal)


def _torch_info(t, device: int | None) -> BufferInfo:
    """BufferInfo of a torch tensor (its CUDA array interface refuses bfloat16, so read it directly)."""
    if not t.is_cuda:
        raise InvalidUsageError(f"expected a CUDA tensor, got a tensor on {t.device} (host memory); "
                                "move it to the GPU first")
    if not t.is_contiguous():
        raise InvalidUsageError(f"tensor of shape {tuple(t.shape)} with strides {t.stride()} is not contiguous; "
                                "pass t.contiguous()")
    name = _TORCH_DTYPE_NAMES.get(t.dtype)
    if name is None:
        name = _TORCH_DTYPE_NAMES[t.dtype] = (str(t.dtype).removeprefix("torch."), t.element_size())
    nbytes = t.nbytes
    return _checked(t.data_ptr(), nbytes, name[0], (nbytes // name[1],), device)


_TORCH_DTYPE_NAMES: dict = {}


def alloc(nbytes: int):
    """A zeroed device byte buffer that can be registered and shared with peers on either backend."""
    if nbytes <= 0:
        raise InvalidUsageError(f"alloc({nbytes}): size must be positive")
    if IS_SIM:
        seg = shm.create(nbytes)
        arr = FakeCUDAArray(seg.array)
        arr._pymscclpp_segment = seg  # keeps the segment (and its file) alive with the array
        return arr
    from numba import cuda
    buf = cuda.device_array(nbytes, dtype=np.uint8)
    cudadrv.memset(buf.__cuda_array_interface__["data"][0], 0, nbytes)
    return buf


def as_bytes(obj):
    """A uint8 device-array view of a contiguous device buffer, for kernels that address bytes."""
    return bytes_view(obj, buffer_info(obj))


def bytes_view(obj, info: BufferInfo):
    """``as_bytes`` for a buffer already validated as ``info``."""
    if IS_SIM:
        return FakeCUDAArray(_sim_array(obj).reshape(-1).view(np.uint8))
    return cudadrv.device_array(info.ptr, info.nbytes, owner=obj)


def view_as(u8_array, dtype, byte_offset: int = 0, count: int | None = None):
    """A typed device-array view of part of a uint8 device array (NumPy under the simulator)."""
    dtype = np.dtype(dtype)
    total = (u8_array.shape[0] - byte_offset) // dtype.itemsize if count is None else count
    if IS_SIM:  # a simulator device array: kernels then use it in place (NumPy arguments are copied in/out)
        raw = getattr(u8_array, "_ary", u8_array)
        view = FakeCUDAArray(raw[byte_offset:byte_offset + total * dtype.itemsize].view(dtype))
        segment = getattr(u8_array, "_pymscclpp_segment", None)
        if segment is not None:  # the view keeps the shared segment (and its registration) alive too
            view._pymscclpp_segment = segment
        return view
    ptr = u8_array.__cuda_array_interface__["data"][0] + byte_offset
    return cudadrv.device_array(ptr, total * dtype.itemsize, dtype, owner=u8_array)


_WIRE = struct.Struct("<8sHB5x16s16siiiiQQQ64s")
_MAGIC = b"PYMSCRM1"
_VERSION = 1
_KIND_GPU_IPC, _KIND_SHM = 1, 2


class RegisteredMemory:
    """A local device buffer made shareable: ``serialize()`` gives the bytes a peer maps with ``RemoteMemory``."""

    def __init__(self, obj, *, job_token: bytes, rank: int, device: int | None = None):
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

    def local_bytes(self):
        """The registered buffer as a uint8 device array."""
        return as_bytes(self.obj)


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
            self.array = FakeCUDAArray(self._segment.array[self.offset:self.offset + self.nbytes])
        else:
            base = cudadrv.ipc_open(handle)
            self.array = cudadrv.device_array(base + self.offset, self.nbytes)
        self._open = True

    def close(self) -> None:
        """Unmap the peer's memory (arrays viewing it must no longer be used)."""
        if not self._open:
            return
        self._open = False
        self.array = None
        if not IS_SIM:
            cudadrv.ipc_close(self._handle)
