"""The one kernel launcher of pymscclpp: named argument slots set once, a per-call rewrite, one driver call.

numba's dispatcher re-types and re-flattens every argument on each launch (~16 us); ``Launch`` does that once,
packs the kernel's parameters into one buffer and issues ``cuLaunchKernel`` with
``CU_LAUNCH_PARAM_BUFFER_POINTER`` on the caller's stream (capturable in a CUDA graph). A call changes only the
slots it names (``set_buffer``, ``set_int``); repeats of unchanged slots go out as a one-node graph
(``graph_repeat``, ``PYMSCCLPP_GRAPH_REPEATS=0`` turns that off). Under the simulator it calls the kernel.
``PYMSCCLPP_LAUNCH``: ``packed`` (default), ``params`` (a pointer per parameter) or ``numba`` (numba's own launch
path).
"""

from __future__ import annotations

import ctypes
import functools

from .. import config
from ..errors import BackendError
from . import kernel_cache
from . import numba_compat as nc
from .backend import IS_SIM, driver_function, libcuda
from .graph_repeat import GraphRepeat, driver_addresses

_CU_LAUNCH_PARAM_END, _CU_LAUNCH_PARAM_BUFFER_POINTER, _CU_LAUNCH_PARAM_BUFFER_SIZE = 0, 1, 2


def _driver() -> ctypes.CDLL:
    """libcuda (``backend.libcuda``, loaded once); launches call it through ``prepared_launch``."""
    lib = libcuda()
    if lib is None:
        raise BackendError("the CUDA driver (libcuda.so.1) cannot be loaded")
    return lib


@functools.cache
def _copy_call():
    return driver_function(("cuMemcpyDtoDAsync_v2",), [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t,
                                                       ctypes.c_void_p])


def launch_mode() -> str:
    """How kernels are launched: ``packed``, ``params`` or ``numba`` (always numba's under the simulator)."""
    if IS_SIM:
        return "numba"
    return config.get("PYMSCCLPP_LAUNCH")


def _param_offsets(values: list) -> tuple[list[int], int]:
    """Offsets of the parameters ``values`` in a packed buffer (each at its natural alignment), and its size."""
    offsets, at = [], 0
    for v in values:
        size = ctypes.sizeof(v)
        at = (at + size - 1) // size * size
        offsets.append(at)
        at += size
    return offsets, at


def _driver_offsets(func: int, count: int) -> list[int] | None:
    """The parameter offsets the driver reports for CUfunction ``func`` (cuFuncGetParamInfo), or None if it cannot."""
    fn = driver_function(("cuFuncGetParamInfo",), [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t),
                                                   ctypes.POINTER(ctypes.c_size_t)])
    if fn is None:
        return None
    offsets, off, size = [], ctypes.c_size_t(), ctypes.c_size_t()
    for i in range(count):
        if fn(func, i, ctypes.byref(off), ctypes.byref(size)) != 0:
            return None
        offsets.append(off.value)
    return offsets


def _checked_types(kernel, args: dict, declared: tuple | None) -> tuple:
    """The numba types of the values ``args``, which must be ``declared`` when that is given."""
    found = nc.argument_types_of(kernel, tuple(args.values()))
    if declared is not None and found != tuple(declared):
        name, got, want = next(d for d in zip(args, found, declared) if d[1] != d[2])
        raise BackendError(f"launch of {kernel.py_func.__name__}: argument {name} is {got}, declared {want}")
    return found


def prepared_launch(address: int, func: int, griddim: int, blockdim: int, sharedmem: int, params, extra):
    """``f(stream) -> CUresult``: the cuLaunchKernel at ``address`` with its eleven arguments made into ctypes objects
    once, so a call converts nothing and only sets the stream (argument conversion cost ~1 us per launch)."""
    stream, u = ctypes.c_void_p(0), ctypes.c_uint
    fn = ctypes.CFUNCTYPE(ctypes.c_int)(address)  # no argument types: the prepared objects go as they are
    args = (ctypes.c_void_p(func), u(griddim), u(1), u(1), u(blockdim), u(1), u(1), u(sharedmem), stream, params, extra)

    def call(handle: int) -> int:
        stream.value = handle
        return fn(*args)
    return call


class Launch:
    """``kernel[griddim, blockdim](**args)`` ready to issue again and again with ``launch(stream)``.

    ``args`` maps the kernel's parameter names, in order, to values (they stay referenced: their memory must
    outlive the launch). ``argtypes``: the numba types the kernel is compiled for, declared ahead (the values
    must have them, checked under the simulator too); by default the values' own (None under the simulator).
    ``compile_s``: seconds to compile or load the kernel; ``disk_cache_hit``: it came from disk (a kept cubin,
    or numba's cache)."""

    def __init__(self, kernel, griddim: int, blockdim: int, args: dict, sharedmem: int = 0,
                 argtypes: tuple | None = None):
        names = list(args)
        if names != nc.parameter_names(kernel):
            raise BackendError(f"launch of {kernel.py_func.__name__}: arguments {names} do not match its "
                               f"parameters {nc.parameter_names(kernel)}")
        self.kernel, self.griddim, self.blockdim, self.sharedmem = kernel, griddim, blockdim, sharedmem
        self.values = dict(args)
        self.mode = launch_mode()
        self.compile_s, self.disk_cache_hit = 0.0, False
        self._repeat: GraphRepeat | None = None  # the graphs of repeated launches (GPU, packed or params mode)
        self.argtypes = argtypes if IS_SIM and argtypes is None else _checked_types(kernel, args, argtypes)
        if IS_SIM:
            return
        if self.mode == "numba":
            _, self.compile_s, self.disk_cache_hit = nc.compile_for(kernel, self.argtypes)
            return
        self._func, self.compile_s, self.disk_cache_hit = kernel_cache.function_for(kernel, self.argtypes)
        flat: list = []
        self._first: dict[str, int] = {}
        for name, ty in zip(names, self.argtypes):
            self._first[name] = len(flat)
            nc.flatten(ty, args[name], flat)
        offsets, total = _param_offsets(flat)
        if self.mode == "packed" and _driver_offsets(self._func, len(flat)) in (None, offsets):
            self._buffer = (ctypes.c_char * max(total, 8))()
            self._slots = [type(v).from_buffer(self._buffer, off) for v, off in zip(flat, offsets)]
            for slot, v in zip(self._slots, flat):
                slot.value = v.value
            self._size = ctypes.c_size_t(total)
            self._extra = (ctypes.c_void_p * 5)(_CU_LAUNCH_PARAM_BUFFER_POINTER, ctypes.addressof(self._buffer),
                                                _CU_LAUNCH_PARAM_BUFFER_SIZE, ctypes.addressof(self._size),
                                                _CU_LAUNCH_PARAM_END)
            self._params = None
        else:
            self.mode = "params"
            self._slots = flat
            self._params = (ctypes.c_void_p * len(flat))(*[ctypes.addressof(v) for v in flat])
            self._extra = None
        self._launch = prepared_launch(ctypes.cast(_driver().cuLaunchKernel, ctypes.c_void_p).value, self._func,
                                       self.griddim, self.blockdim, self.sharedmem, self._params, self._extra)
        self._version = 0  # bumped by every change of a slot
        addresses = driver_addresses(_driver()) if config.get("PYMSCCLPP_GRAPH_REPEATS") else None
        self._repeat = None if addresses is None else GraphRepeat(
            addresses, self._func, self.griddim, self.blockdim, self.sharedmem, self._params, self._extra)

    @property
    def name(self) -> str:
        """The kernel's name (its Python function's)."""
        return self.kernel.py_func.__name__

    def launch_kept(self, key, stream: int) -> bool:
        """Issue the graph kept for ``key`` (see ``launch``) on ``stream``, whatever the slots hold now; False,
        issuing nothing, when there is none for ``key`` or the stream is being captured."""
        rc = None if self._repeat is None else self._repeat.launch_kept(key, stream)
        if rc is None:
            return False
        if rc != 0:
            raise BackendError(f"graph launch of {self.kernel.py_func.__name__} failed with CUresult {rc}")
        return True

    def set_buffer(self, name: str, ptr: int, nbytes: int, array=None) -> None:
        """Slot ``name`` (a 1-D uint8 array) now views ``nbytes`` at device address ``ptr``; the simulator, which
        has no addresses, takes ``array`` itself."""
        if self.mode == "numba":
            if array is None:
                from . import cudadrv
                array = cudadrv.device_array(ptr, nbytes)
            self.values[name] = array
            return
        base = self._first[name]
        if (self._slots[base + nc.ARRAY_DATA].value or 0) != ptr or self._slots[base + nc.ARRAY_NITEMS].value != nbytes:
            self._slots[base + nc.ARRAY_NITEMS].value = nbytes
            self._slots[base + nc.ARRAY_DATA].value = ptr
            self._slots[base + nc.ARRAY_SHAPE0].value = nbytes  # the stride stays 1
            self._version += 1

    def set_int(self, name: str, value: int) -> None:
        """Integer slot ``name`` is now ``value``."""
        if self.mode == "numba":
            self.values[name] = value
            return
        slot = self._slots[self._first[name]]
        if slot.value != value:
            slot.value = value
            self._version += 1

    def set_ints(self, name: str, values: tuple) -> None:
        """Slot ``name`` (a tuple of integers, passed by value: a graph captures them) is now ``values``."""
        if self.mode == "numba":
            self.values[name] = tuple(values)
            return
        base = self._first[name]
        for i, value in enumerate(values):
            slot = self._slots[base + i]
            if slot.value != value:
                slot.value = value
                self._version += 1

    def launch(self, stream: int = 0, key=None) -> None:
        """Issue the kernel on the CUstream ``stream`` (a raw handle; 0 is the legacy default stream). ``key``: an
        object standing for the slots' current values (its graph is kept for ``launch_kept``), else their repeats
        go out as the graph of the slots' version."""
        if self.mode != "numba":
            repeat = self._repeat
            rc = None if repeat is None or key is not None else repeat.launch(self._version, stream)
            if rc is None:
                rc = self._launch(stream)
                if key is not None and repeat is not None and rc == 0:
                    repeat.launched(key)
            if rc != 0:
                raise BackendError(f"launch of {self.kernel.py_func.__name__} failed with CUresult {rc}")
            return
        if IS_SIM:
            self.kernel[self.griddim, self.blockdim](*self.values.values())
            return
        from numba import cuda
        s = cuda.default_stream() if stream == 0 else cuda.external_stream(stream)
        self.kernel[self.griddim, self.blockdim, s, self.sharedmem](*self.values.values())


def copy_async(dst_ptr: int, src_ptr: int, nbytes: int, stream: int) -> None:
    """Device-to-device copy on ``stream`` (GPU backend; capturable in a CUDA graph)."""
    rc = _copy_call()(dst_ptr, src_ptr, nbytes, stream)
    if rc != 0:
        raise BackendError(f"cuMemcpyDtoDAsync failed with CUresult {rc}")
