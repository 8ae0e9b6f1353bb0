"""Broadcast over the one-shot set-up: the root puts, every peer copies out; ``launch(..., root)``."""

from __future__ import annotations

from . import broadcast_kernels as k
from .oneshot import OneShot


class Broadcast(OneShot):
    """Root-to-all broadcast through one scratch slot per half, with credits from peers to the root."""

    kernels = {"packet": k.broadcast_packets, "simple": k.broadcast_simple}
    rooted = True
    nparams = 1
