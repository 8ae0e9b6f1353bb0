"""All-reduce: one-shot all-pairs, every rank reducing all ranks' data in rank order (bit-identical results)."""

from __future__ import annotations

from . import allreduce_kernels as k
from .oneshot import OneShot


class AllReduce(OneShot):
    """``packet``: LL16, one packet hop (small messages); ``simple``: puts plus one signal per block and peer,
    in rounds (large messages). Launch parameters: the dtype kind and the reduction op codes."""

    kernels = {"packet": k.allreduce_packets, "simple": k.allreduce_simple}
    nparams = 2
