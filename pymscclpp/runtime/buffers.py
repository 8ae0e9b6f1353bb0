"""User buffers and streams as kernels see them: validate a buffer (contiguous device memory on the right GPU,
any ``__cuda_array_interface__`` object or torch tensor; numba simulator arrays or CPU tensors under the
simulator), view it as bytes, and turn a caller's stream (torch, cupy, numba, a raw handle, or None) into a handle.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ..errors import InvalidUsageError
from .backend import IS_SIM

if IS_SIM:
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
else:
    from . import cudadrv


Buffer = Any
"""A device buffer: a numba or CuPy device array, a torch tensor, ``pymscclpp.alloc``'s, any contiguous
``__cuda_array_interface__`` object (under the simulator also NumPy arrays and CPU tensors)."""
Stream = Any
"""A CUDA stream: numba's, CuPy's or torch's, or a raw handle as an int; None: the buffer's current one."""


class BufferInfo(NamedTuple):
    """A validated contiguous device buffer, parsed once: ``dtype`` is a name (``float32``, ``bfloat16``, ...);
    ``array`` its bytes as a uint8 device array under the simulator (which has no addresses), None on the GPU
    (kernels take ``ptr``)."""
    ptr: int
    nbytes: int
    dtype: str
    shape: tuple
    device: int
    array: object = None

    @property
    def count(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)


class DeviceView:
    """``count`` elements of ``dtype`` at device address ``ptr``, seen through ``__cuda_array_interface__``;
    immutable, so a call repeated on the same view needs no new checks (``owner`` keeps the memory's object).
    ``name``: the Communicator's dtype name, which NumPy may lack (bfloat16, float8: then ``dtype`` is raw bytes
    of its size), ``dtype.name`` by default."""

    __slots__ = ("ptr", "count", "dtype", "owner", "name", "__weakref__")

    def __init__(self, ptr: int, count: int, dtype: np.dtype, owner=None, name: str | None = None):
        for slot, value in zip(self.__slots__, (ptr, count, dtype, owner, name or dtype.name)):
            object.__setattr__(self, slot, value)

    def __setattr__(self, name, value):
        raise AttributeError(f"DeviceView is immutable: cannot set {name}")

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": (self.count,), "typestr": self.dtype.str, "data": (self.ptr, False), "version": 3,
                "strides": None}


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
        return BufferInfo(arr.ctypes.data, arr.nbytes, arr.dtype.name, arr.shape, 0, _sim_bytes(obj, arr))
    if type(obj) is DeviceView:
        return _checked(obj.ptr, obj.count * obj.dtype.itemsize, obj.name, (obj.count,), device)
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


def as_bytes(obj):
    """A uint8 device-array view of a contiguous device buffer, for kernels that address bytes."""
    return bytes_view(obj, buffer_info(obj))


def bytes_view(obj, info: BufferInfo):
    """``as_bytes`` for a buffer already validated as ``info``."""
    if IS_SIM:
        return info.array
    return cudadrv.device_array(info.ptr, info.nbytes, owner=obj)


def _sim_bytes(obj, arr: np.ndarray):
    """The simulator's uint8 device-array view of ``obj`` (whose memory is ``arr``)."""
    view = FakeCUDAArray(arr.reshape(-1).view(np.uint8))
    segment = getattr(obj, "_pymscclpp_segment", None)
    if segment is not None:  # the view keeps a shared segment (and its registration) alive, like the GPU's
        view._pymscclpp_segment = segment
    return view


def stream_handle(stream, buffer=None, device: int = 0) -> int:
    """The raw CUstream handle of ``stream``; for None, torch's current stream when ``buffer`` is a torch
    tensor (so collectives follow torch's stream and graph capture), else 0 (the legacy default stream)."""
    if stream is None:
        if buffer is not None and not IS_SIM and type(buffer).__module__.split(".")[0] == "torch":
            import torch
            return torch._C._cuda_getCurrentRawStream(device)
        return 0
    if isinstance(stream, int):
        return stream
    if IS_SIM and type(stream).__module__.startswith("numba"):
        return 0  # the simulator runs every kernel at once, on its single stream
    for attr in ("cuda_stream", "ptr", "handle"):  # torch, cupy, numba/cuda.core
        value = getattr(stream, attr, None)
        if value is not None:
            return int(value.value if hasattr(value, "value") else value)
    raise InvalidUsageError(f"cannot use {type(stream).__name__} as a CUDA stream: pass a torch/cupy/numba "
                            "stream or a raw handle (int)")


def as_numba_stream(stream):
    """A numba stream launching on the caller's stream (the simulator has only one)."""
    from numba import cuda
    if IS_SIM:
        return cuda.default_stream()
    if stream is not None and type(stream).__module__.startswith("numba"):
        return stream
    handle = stream_handle(stream)
    return cuda.default_stream() if handle == 0 else cuda.external_stream(handle)
