"""Turn a caller's stream (torch, cupy, numba, a raw handle, or None) into a numba stream."""

from __future__ import annotations

from ..errors import InvalidUsageError
from .backend import IS_SIM


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
