"""Everything pymscclpp needs from numba-cuda's internals, in one place, for the versions it was tested with.

The launcher types argument values as a dispatcher does, compiles it (or loads the cubin it linked before),
reads the compiled kernel's CUfunction and lays out its parameters the way numba-cuda's own launch path does
(``_Kernel._prepare_args``). Those are private
details of numba-cuda: a numba-cuda outside ``TESTED`` gets a warning once here, and the test suite fails
(``tests/test_numba_compat.py``) until the range is checked and widened.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import time
import warnings

import numpy as np

from ..errors import BackendError

TESTED = ((0, 30, 4), (0, 31, 0))  # numba-cuda versions [low, high) whose internals this module matches
_checked = False


def version() -> tuple[int, ...]:
    """The installed numba-cuda version as integers (pre-release tags dropped)."""
    raw = importlib.metadata.version("numba-cuda")
    parts = []
    for piece in raw.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def is_tested(v: tuple[int, ...] | None = None) -> bool:
    """True when numba-cuda ``v`` (default: the installed one) lies in ``TESTED``."""
    v = version() if v is None else v
    return TESTED[0] <= v < TESTED[1]


def _warn_untested() -> None:
    global _checked
    if not _checked:
        _checked = True
        if not is_tested():
            low, high = (".".join(map(str, t)) for t in TESTED)
            warnings.warn(f"numba-cuda {'.'.join(map(str, version()))} is outside the versions pymscclpp's launcher "
                          f"was tested with ([{low}, {high})); set PYMSCCLPP_LAUNCH=numba if launches fail",
                          RuntimeWarning, stacklevel=3)


def argument_types_of(kernel, args: tuple) -> tuple:
    """The numba types dispatcher ``kernel`` gives the values ``args`` (no compilation); a simulator kernel,
    which types nothing, gets numba's argument types."""
    _warn_untested()
    typeof = getattr(kernel, "typeof_pyval", None)
    if typeof is None:
        from numba.core.typing.typeof import Purpose, typeof as numba_typeof
        return tuple(numba_typeof(a, Purpose.argument) for a in args)
    return tuple(typeof(a) for a in args)


def compile_for(kernel, argtypes: tuple):
    """(compiled kernel, seconds taken, whether numba's disk cache served it) of dispatcher ``kernel`` for
    ``argtypes``."""
    start = time.perf_counter()
    hits = sum(kernel._cache_hits.values())
    compiled = kernel.compile(argtypes)
    return compiled, time.perf_counter() - start, sum(kernel._cache_hits.values()) > hits


def options(kernel) -> str:
    """The compile options of dispatcher ``kernel``, as text (part of what names its compiled code)."""
    return repr(sorted((k, repr(v)) for k, v in kernel.targetoptions.items()))


def binary(compiled, cc: tuple[int, int]) -> tuple[bytes, str] | None:
    """(linked cubin for ``cc``, entry name) of a compiled kernel, or None when loading it needs more than
    the module (numba set-up functions)."""
    lib = compiled._codelibrary
    if lib._setup_functions or lib._teardown_functions:
        return None
    cubin = lib.get_cubin(cc=cc)
    cubin = getattr(cubin, "code", cubin)  # numba-cuda 0.30 links to a cuda.core ObjectCode
    return (bytes(cubin), lib._entry_name) if isinstance(cubin, (bytes, bytearray)) else None


_modules: list = []  # modules loaded from cubins stay loaded for the process


def context_id() -> int:
    """numba's current CUDA context as a number (functions loaded in one context are not valid in another)."""
    from numba import cuda
    handle = cuda.current_context().handle
    return int(getattr(handle, "value", handle) or 0)


def load_binary(cubin: bytes, entry: str) -> int:
    """The CUfunction (as an int) of ``entry`` in ``cubin``, loaded into numba's current context."""
    from cuda.bindings import driver as cu
    from numba import cuda
    cuda.current_context()
    err, module = cu.cuModuleLoadData(cubin)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise BackendError(f"cuModuleLoadData failed: {err.name}")
    err, func = cu.cuModuleGetFunction(module, entry.encode())
    if err != cu.CUresult.CUDA_SUCCESS:
        raise BackendError(f"cuModuleGetFunction({entry}) failed: {err.name}")
    _modules.append(module)
    return int(func)


def parameter_names(kernel) -> list[str]:
    """The Python parameter names of dispatcher ``kernel``, in order."""
    code = kernel.py_func.__code__
    return list(code.co_varnames[:code.co_argcount])


def cu_function(compiled) -> int:
    """The CUfunction (as an int) of a compiled numba kernel in the current context."""
    from cuda.bindings import driver as cu
    handle = compiled._codelibrary.get_cufunc().handle
    if isinstance(handle, cu.CUkernel):
        err, handle = cu.cuKernelGetFunction(handle)
        if err != cu.CUresult.CUDA_SUCCESS:
            raise BackendError(f"cuKernelGetFunction failed: {err.name}")
    return int(handle)


def flatten(ty, val, out: list) -> None:
    """Append the ctypes values numba passes for argument ``val`` of numba type ``ty``: arrays become meminfo,
    parent, size, itemsize, data, shape, strides; tuples their members in order."""
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
            flatten(t, v, out)
    elif isinstance(ty, types.Integer):
        out.append(getattr(ctypes, f"c_{ty}")(int(val)))
    elif ty == types.boolean:
        out.append(ctypes.c_bool(bool(val)))
    else:
        raise TypeError(f"the launcher cannot pass an argument of type {ty}")


ARRAY_DATA, ARRAY_NITEMS, ARRAY_SHAPE0 = 4, 2, 5  # positions, in an array's flattened values, of what a view changes
