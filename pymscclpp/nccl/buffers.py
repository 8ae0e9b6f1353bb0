"""Raw device pointers (cupy's API) or device arrays, as buffers of ``count`` elements the Communicator accepts.

On GPUs a pointer becomes a ``__cuda_array_interface__`` object, after checking that ``count`` elements
fit in its allocation. Under the simulator device memory is host memory, so a pointer (an address
from ``buffer_info(array).ptr``) is viewed in place.
"""

from __future__ import annotations

import ctypes
import functools
from typing import NamedTuple

import numpy as np

from ..errors import InvalidUsageError
from ..runtime.backend import IS_SIM
from ..runtime.buffers import DeviceView, buffer_info, bytes_view
from ..runtime.memory import view_as
from .constants import ITEMSIZES

if IS_SIM:
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
else:
    from ..runtime import cudadrv


class Buffer(NamedTuple):
    """A validated buffer: ``obj`` for the Communicator, ``ptr`` for NCCL."""
    obj: object
    ptr: int


@functools.lru_cache(maxsize=None)
def numpy_dtype(name: str) -> np.dtype:
    """The NumPy dtype named ``name``: bfloat16 and float8 come from ml_dtypes, else are raw bytes of their size."""
    try:
        return np.dtype(name)
    except TypeError:
        try:
            import ml_dtypes
            return np.dtype(getattr(ml_dtypes, name))
        except (ImportError, AttributeError):
            return np.dtype(f"V{ITEMSIZES[name]}")


def typed(name: str) -> bool:
    """Whether buffers made here show the Communicator dtype ``name``: on GPUs always (a DeviceView carries the
    name), under the simulator when NumPy has it (bfloat16 and float8 with ml_dtypes)."""
    return not IS_SIM or numpy_dtype(name).name == name


def device_buffer(buf, count: int, dtype_name: str, what: str) -> Buffer:
    """``count`` elements of ``dtype_name`` at ``buf``: a device pointer (int) or a device array."""
    dtype = numpy_dtype(dtype_name)
    nbytes = count * dtype.itemsize
    if isinstance(buf, (int, np.integer)) and not isinstance(buf, bool):
        ptr = int(buf)
        if ptr <= 0 and nbytes:
            raise InvalidUsageError(f"{what}={ptr:#x} is not a device pointer")
        if IS_SIM:
            raw = (ctypes.c_uint8 * nbytes).from_address(ptr) if nbytes else np.empty(0, np.uint8)
            return Buffer(FakeCUDAArray(np.ctypeslib.as_array(raw).view(dtype)), ptr)
        _check_extent(ptr, nbytes, count, dtype_name, what)
        return Buffer(_view(ptr, count, dtype_name), ptr)
    info = buffer_info(buf)
    if nbytes > info.nbytes:
        raise InvalidUsageError(f"{what}: count {count} of {dtype_name} needs {nbytes} bytes, but the buffer "
                                f"has {info.nbytes}")
    if IS_SIM:
        return Buffer(view_as(bytes_view(buf, info), dtype, 0, count), info.ptr)
    return Buffer(DeviceView(info.ptr, count, dtype, owner=buf, name=dtype_name), info.ptr)


_VIEWS: dict[tuple, DeviceView] = {}  # (pointer, count, dtype name) -> its view: a repeat passes the same object
_MAX_VIEWS = 256


def _view(ptr: int, count: int, dtype_name: str) -> DeviceView:
    """The view of ``count`` ``dtype_name`` at ``ptr``, the same object for the same pointer (the Communicator
    then recognises a repeated call)."""
    key = (ptr, count, dtype_name)
    view = _VIEWS.get(key)
    if view is None:
        if len(_VIEWS) >= _MAX_VIEWS:
            del _VIEWS[next(iter(_VIEWS))]
        view = _VIEWS[key] = DeviceView(ptr, count, numpy_dtype(dtype_name), name=dtype_name)
    return view


def _check_extent(ptr: int, nbytes: int, count: int, dtype_name: str, what: str) -> None:
    """Raise unless ``nbytes`` at ``ptr`` lie in one device allocation."""
    if not nbytes:
        return
    kind, _, base, size = cudadrv.pointer_info(ptr)
    if kind != "device":
        raise InvalidUsageError(f"{what}={ptr:#x}: expected GPU device memory, got {kind} memory")
    if ptr + nbytes > base + size:
        raise InvalidUsageError(f"{what}: count {count} of {dtype_name} needs {nbytes} bytes, but only "
                                f"{base + size - ptr} remain in the allocation at {ptr:#x}")
