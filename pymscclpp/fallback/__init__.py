"""Fallbacks for calls pymscclpp's own algorithms do not cover: NCCL through ctypes."""

from .nccl import NcclError, NcclFallback, NcclUnavailableError, available, fallback_for, missing

__all__ = ["NcclError", "NcclFallback", "NcclUnavailableError", "available", "fallback_for", "missing"]
