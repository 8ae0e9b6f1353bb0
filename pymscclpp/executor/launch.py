"""Low-overhead kernel launches: build a numba kernel's argument block once, then launch with one driver call.

numba's dispatcher re-types and re-flattens every argument on each launch (~16 us on a fast host);
``PreparedLaunch`` does that once and launches with ``cuLaunchKernel`` on the caller's stream (~4 us),
which also works while the stream is being captured into a CUDA graph. Under the simulator it just
calls the kernel. Set ``PYMSCCLPP_LAUNCH=numba`` to launch through numba's dispatcher instead.
"""

from __future__ import annotations

import ctypes
import os
import time

import numpy as np

from ..errors import BackendError
from ..runtime.backend import IS_SIM

_libcuda = None


def _driver():
    """libcuda's cuLaunchKernel with its argument types set (loaded on first use)."""
    global _libcuda
    if _libcuda is None:
        lib = ctypes.CDLL("libcuda.so.1")
        fn = lib.cuLaunchKernel
        fn.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
        fn.restype = ctypes.c_int
        copy = lib.cuMemcpyDtoDAsync_v2
        copy.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p]
        copy.restype = ctypes.c_int
        _libcuda = lib
    return _libcuda


def _flatten(ty, val, out: list) -> None:
    """Append the ctypes values numba passes for argument ``val`` of numba type ``ty`` (see numba-cuda's
    ``_Kernel._prepare_args``): arrays become meminfo, parent, size, itemsize, data, shape, strides."""
    from numba.core import types
    if isinstance(ty, types.Array):
        cai = val.__cuda_array_interface__
        itemsize = np.dtype(cai["typestr"]).itemsize
        shape = tuple(cai["shape"])
        strides = cai.get("strides") or tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) * itemsize
                                              for i in range(len(shape)))
        out += [ctypes.c_void_p(0), ctypes.c_void_p(0), ctypes.c_int64(int(np.prod(shape, dtype=np.int64))),
                ctypes.c_int64(itemsize), ctypes.c_void_p(int(cai["data"][0]))]
        out += [ctypes.c_int64(s) for s in shape] + [ctypes.c_int64(s) for s in strides]
    elif isinstance(ty, types.BaseTuple):
        for t, v in zip(ty, val):
            _flatten(t, v, out)
    elif isinstance(ty, types.Integer):
        out.append(getattr(ctypes, f"c_{ty}")(int(val)))
    elif ty == types.boolean:
        out.append(ctypes.c_bool(bool(val)))
    else:
        raise TypeError(f"PreparedLaunch cannot pass an argument of type {ty}")


def _cu_function(compiled) -> int:
    """The CUfunction (as an int) of a compiled numba kernel in the current context."""
    from cuda.bindings import driver as cu
    handle = compiled._codelibrary.get_cufunc().handle
    if isinstance(handle, cu.CUkernel):
        err, handle = cu.cuKernelGetFunction(handle)
        if err != cu.CUresult.CUDA_SUCCESS:
            raise BackendError(f"cuKernelGetFunction failed: {err.name}")
    return int(handle)


class PreparedLaunch:
    """``kernel[griddim, blockdim](*args)`` ready to go: ``launch(stream_handle)`` issues it again and again.

    ``kernel`` is a numba CUDA dispatcher; ``args`` stay referenced (their memory must outlive this object).
    ``compile_s`` is the time taken to compile (or load from numba's disk cache) the kernel for ``args``.
    """

    def __init__(self, kernel, griddim: int, blockdim: int, args: tuple, sharedmem: int = 0):
        self.kernel, self.griddim, self.blockdim, self.args = kernel, griddim, blockdim, tuple(args)
        self.sharedmem = sharedmem
        self.compile_s = 0.0
        self.disk_cache_hit = False
        self._use_numba = IS_SIM or os.environ.get("PYMSCCLPP_LAUNCH", "").strip().lower() == "numba"
        if IS_SIM:
            return
        start = time.perf_counter()
        argtypes = tuple(kernel.typeof_pyval(a) for a in self.args)
        hits = sum(kernel._cache_hits.values())
        compiled = kernel.compile(argtypes)
        self.compile_s = time.perf_counter() - start
        self.disk_cache_hit = sum(kernel._cache_hits.values()) > hits
        if self._use_numba:
            return
        self._values: list = []
        for ty, val in zip(compiled.argument_types, self.args):
            _flatten(ty, val, self._values)
        self._params = (ctypes.c_void_p * len(self._values))(*[ctypes.addressof(v) for v in self._values])
        self._func = ctypes.c_void_p(_cu_function(compiled))
        self._launch = _driver().cuLaunchKernel

    def launch(self, stream: int = 0) -> None:
        """Issue the kernel on the CUstream ``stream`` (a raw handle; 0 is the legacy default stream)."""
        if self._use_numba:
            if IS_SIM:
                self.kernel[self.griddim, self.blockdim](*self.args)
                return
            from numba import cuda
            s = cuda.default_stream() if stream == 0 else cuda.external_stream(stream)
            self.kernel[self.griddim, self.blockdim, s, self.sharedmem](*self.args)
            return
        rc = self._launch(self._func, self.griddim, 1, 1, self.blockdim, 1, 1, self.sharedmem,
                          ctypes.c_void_p(stream), self._params, None)
        if rc != 0:
            raise BackendError(f"cuLaunchKernel failed with CUresult {rc}")


def copy_async(dst_ptr: int, src_ptr: int, nbytes: int, stream: int) -> None:
    """Device-to-device copy on ``stream`` (GPU backend; capturable in a CUDA graph)."""
    rc = _driver().cuMemcpyDtoDAsync_v2(dst_ptr, src_ptr, nbytes, ctypes.c_void_p(stream))
    if rc != 0:
        raise BackendError(f"cuMemcpyDtoDAsync failed with CUresult {rc}")
