"""The proxy's copy engine: CUDA driver calls through ctypes (callable from numba-compiled code), or libc on the simulator.

GPU: async device-to-device copies and 64-bit stream writes on the proxy's own stream, plus the
synchronous host<->device staging copies of the network transports. Simulator: device memory is
host shared memory, so every copy is a memcpy and a stream is a no-op.
"""

from __future__ import annotations

import ctypes

from ..errors import BackendError
from ..runtime.backend import BACKEND, IS_SIM, driver_function

_U64, _SZ, _U32, _INT = ctypes.c_uint64, ctypes.c_size_t, ctypes.c_uint32, ctypes.c_int


def _fn(lib, names, argtypes, restype=_INT):
    for name in names:
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.argtypes, fn.restype = argtypes, restype
            return fn
    raise BackendError(f"libc has none of {', '.join(names)}")


def _cu(names, argtypes):
    fn = driver_function(tuple(names), argtypes)
    if fn is None:
        raise BackendError(f"the CUDA driver has none of {', '.join(names)}")
    return fn


_libc = ctypes.CDLL(None)
memcpy = _fn(_libc, ["memcpy"], [_U64, _U64, _SZ], _U64)
usleep = _fn(_libc, ["usleep"], [_U32])
clock_gettime = _fn(_libc, ["clock_gettime"], [_INT, _U64])
CLOCK_MONOTONIC = 1

if BACKEND == "gpu":  # (the compile-only backend has no driver)
    copy_dtod_async = _cu(["cuMemcpyDtoDAsync_v2"], [_U64, _U64, _SZ, _U64])
    stream_write64 = _cu(["cuStreamWriteValue64_v2", "cuStreamWriteValue64"], [_U64, _U64, _U64, _U32])
    stream_sync = _cu(["cuStreamSynchronize"], [_U64])
    copy_htod_async = _cu(["cuMemcpyHtoDAsync_v2"], [_U64, _U64, _SZ, _U64])
    copy_dtoh_async = _cu(["cuMemcpyDtoHAsync_v2"], [_U64, _U64, _SZ, _U64])
    _stream_create = _cu(["cuStreamCreate"], [ctypes.POINTER(_U64), _U32])
    _stream_destroy = _cu(["cuStreamDestroy_v2"], [_U64])
    _mem_alloc = _cu(["cuMemAlloc_v2"], [ctypes.POINTER(_U64), _SZ])
    _mem_free = _cu(["cuMemFree_v2"], [_U64])


def check(rc: int, what: str) -> None:
    """Raise BackendError naming the driver call when ``rc`` is not CUDA_SUCCESS."""
    if rc != 0:
        raise BackendError(f"{what} failed with CUresult {rc}")


def to_host(dst_host: int, src: int, nbytes: int, stream: int) -> None:
    """Copy ``nbytes`` from device address ``src`` to host address ``dst_host`` on ``stream`` and wait for it.
    (Never the legacy default stream: a kernel waiting on the proxy would block the copy.)"""
    if IS_SIM:
        memcpy(dst_host, src, nbytes)
    else:
        check(copy_dtoh_async(dst_host, src, nbytes, stream), "cuMemcpyDtoHAsync")
        check(stream_sync(stream), "cuStreamSynchronize")


def to_device(dst: int, src_host: int, nbytes: int, stream: int) -> None:
    """Copy ``nbytes`` from host address ``src_host`` to device address ``dst`` on ``stream`` and wait for it."""
    if IS_SIM:
        memcpy(dst, src_host, nbytes)
    else:
        check(copy_htod_async(dst, src_host, nbytes, stream), "cuMemcpyHtoDAsync")
        check(stream_sync(stream), "cuStreamSynchronize")


def make_current(device: int) -> None:
    """Make the device's (numba) context current on the calling thread; nothing on the simulator."""
    if not IS_SIM:
        from numba import cuda
        cuda.select_device(device)


def create_stream() -> int:
    """A new non-blocking stream of the current context (0 on the simulator)."""
    if IS_SIM:
        return 0
    handle = _U64(0)
    check(_stream_create(ctypes.byref(handle), 1), "cuStreamCreate")
    return handle.value


def destroy_stream(stream: int) -> None:
    if not IS_SIM and stream:
        check(_stream_destroy(stream), "cuStreamDestroy")


def stream_writes_work(stream: int) -> bool:
    """Whether cuStreamWriteValue64 works here (probed on a scratch word); the proxy falls back to
    synchronize-then-copy when it does not."""
    if IS_SIM:
        return True
    word = _U64(0)
    check(_mem_alloc(ctypes.byref(word), 8), "cuMemAlloc")
    try:
        if stream_write64(stream, word.value, 0x5EED, 0) != 0 or stream_sync(stream) != 0:
            return False
        out = _U64(0)
        to_host(ctypes.addressof(out), word.value, 8, stream)
        return out.value == 0x5EED
    finally:
        _mem_free(word.value)
