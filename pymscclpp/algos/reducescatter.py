"""Reduce-scatter over the one-shot set-up: rank r gets every rank's slot r reduced in rank order."""

from __future__ import annotations

from . import reducescatter_kernels as k
from .oneshot import OneShot


class ReduceScatter(OneShot):
    """One-shot all-pairs reduce-scatter; ``launch(..., kind, op)`` take the dtype kind and op codes."""

    kernels = {"packet": k.reducescatter_packets, "simple": k.reducescatter_simple}
    send_all = True
    nparams = 2
