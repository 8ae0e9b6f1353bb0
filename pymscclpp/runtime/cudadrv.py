"""Thin CUDA driver helpers over cuda.bindings (GPU backend only): pointers, IPC handles, pinned host maps.

IPC handles are moved as their 64 raw bytes (numba's IpcHandle pickling breaks with
cuda-bindings >= 13.4); opened mappings are reference-counted and closed on release.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np
from cuda.bindings import driver as cu
from numba import cuda

from ..errors import BackendError, RegistrationError
from .backend import driver_function

IPC_HANDLE_BYTES = 64
_open_lock = threading.Lock()
_attribute_lock = threading.Lock()  # pointer_info's value slots are shared
_opened: dict[bytes, list] = {}  # handle bytes -> [base address, refcount]


def check(result, what: str):
    """Unpack a cuda.bindings result tuple, raising BackendError naming the call on failure."""
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != cu.CUresult.CUDA_SUCCESS:
        _, msg = cu.cuGetErrorString(err)
        text = msg.decode() if isinstance(msg, bytes) else str(msg)
        raise BackendError(f"{what} failed: {err.name} ({text})")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


def ensure_context() -> int:
    """Make numba's context current on this thread; the device ordinal in use."""
    return cuda.current_context().device.id


_ATTRIBUTES = None  # (count, CUpointer_attribute array, value slots, their addresses) of pointer_info's one call


def _pointer_attributes(ptr: int) -> tuple[int, int, int, int]:
    """(memory type, device ordinal, range start, range size) of ``ptr`` in one cuPointerGetAttributes call, through
    libcuda directly (cuda-bindings 13.3 reports DEVICE_ORDINAL as 0 for memory on other devices); memory type 0
    for memory the driver does not know."""
    global _ATTRIBUTES
    if _ATTRIBUTES is None:
        a = cu.CUpointer_attribute
        names = (a.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                 a.CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, a.CU_POINTER_ATTRIBUTE_RANGE_SIZE)
        values = (ctypes.c_uint(), ctypes.c_int(), ctypes.c_uint64(), ctypes.c_size_t())
        kinds = (ctypes.c_int * 4)(*(int(n) for n in names))
        slots = (ctypes.c_void_p * 4)(*(ctypes.addressof(v) for v in values))
        call = driver_function(("cuPointerGetAttributes",),
                               [ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64])
        _ATTRIBUTES = (call, kinds, slots, values)
    call, kinds, slots, values = _ATTRIBUTES
    with _attribute_lock:
        for v in values:
            v.value = 0
        if call(4, kinds, slots, ptr) != 0:
            return 0, -1, 0, 0
        return tuple(v.value for v in values)


_KINDS = {int(cu.CUmemorytype.CU_MEMORYTYPE_DEVICE): "device", int(cu.CUmemorytype.CU_MEMORYTYPE_HOST): "host",
          int(cu.CUmemorytype.CU_MEMORYTYPE_UNIFIED): "managed"}


def pointer_info(ptr: int) -> tuple[str, int, int, int]:
    """(memory type, device ordinal, allocation base, allocation size) of a pointer."""
    mtype, ordinal, base, size = _pointer_attributes(ptr)
    if mtype == 0:
        return "host", -1, 0, 0  # unregistered host memory is unknown to the driver
    kind = _KINDS.get(mtype, "unknown")
    if kind != "device":
        return kind, -1, 0, 0
    return kind, ordinal, base, size


def ipc_handle(base: int) -> bytes:
    """The 64 bytes of the IPC handle of the allocation starting at ``base``."""
    handle = check(cu.cuIpcGetMemHandle(cu.CUdeviceptr(base)), "cuIpcGetMemHandle")
    raw = bytes(handle.reserved)
    if len(raw) != IPC_HANDLE_BYTES:
        raise BackendError(f"cuIpcGetMemHandle returned {len(raw)} bytes, expected {IPC_HANDLE_BYTES}")
    return raw


def ipc_open(raw: bytes) -> int:
    """Map a peer allocation from its handle bytes (once per process); its base address here."""
    with _open_lock:
        entry = _opened.get(raw)
        if entry is not None:
            entry[1] += 1
            return entry[0]
        handle = cu.CUipcMemHandle()
        handle.reserved = raw
        try:
            ptr = check(cu.cuIpcOpenMemHandle(handle, cu.CUipcMem_flags.CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                        "cuIpcOpenMemHandle")
        except BackendError as exc:
            raise RegistrationError(f"cannot map the peer's memory: {exc}") from None
        _opened[raw] = [int(ptr), 1]
        return int(ptr)


def ipc_close(raw: bytes) -> None:
    """Drop one reference to a mapping; unmap it when the last goes."""
    with _open_lock:
        entry = _opened.get(raw)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            del _opened[raw]
            check(cu.cuIpcCloseMemHandle(cu.CUdeviceptr(entry[0])), "cuIpcCloseMemHandle")


def host_register(array: np.ndarray) -> int:
    """Pin host memory (e.g. a shared-memory segment) and map it for the device; the device address."""
    flags = cu.CU_MEMHOSTREGISTER_PORTABLE | cu.CU_MEMHOSTREGISTER_DEVICEMAP
    check(cu.cuMemHostRegister(array.ctypes.data, array.nbytes, flags), "cuMemHostRegister")
    return int(check(cu.cuMemHostGetDevicePointer(array.ctypes.data, 0), "cuMemHostGetDevicePointer"))


def host_unregister(array: np.ndarray) -> None:
    """Undo host_register."""
    check(cu.cuMemHostUnregister(array.ctypes.data), "cuMemHostUnregister")


def memset(ptr: int, value: int, nbytes: int) -> None:
    """Set ``nbytes`` bytes at device address ``ptr`` to ``value`` (synchronous)."""
    check(cu.cuMemsetD8(cu.CUdeviceptr(ptr), value, nbytes), "cuMemsetD8")


def device_array(ptr: int, nbytes: int, dtype=np.uint8, owner=None):
    """A numba device array viewing ``nbytes`` at device address ``ptr`` (memory not owned)."""
    dtype = np.dtype(dtype)
    desc = {"shape": (nbytes // dtype.itemsize,), "strides": None, "typestr": dtype.str,
            "data": (ptr, False), "version": 3}
    return cuda.from_cuda_array_interface(desc, owner=owner, sync=False)


def synchronize_within(seconds: float) -> bool:
    """Wait at most ``seconds`` for this process's kernels to end (abort's waits end within microseconds, so its
    unmapping never pulls memory from under a kernel still running); False when some still run then."""
    done = threading.Event()

    def wait() -> None:
        try:
            cuda.synchronize()
        except Exception:  # noqa: BLE001 (a kernel's sticky error is reported by the call that launched it)
            pass
        done.set()

    threading.Thread(target=wait, name="pymscclpp-abort-sync", daemon=True).start()
    return done.wait(seconds)
