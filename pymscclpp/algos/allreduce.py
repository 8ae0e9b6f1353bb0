"""All-reduce: one-shot all-pairs, every rank reducing all ranks' data in rank order (bit-identical results)."""

from __future__ import annotations

from . import reduce_kernels as k
from .oneshot import OneShot


class AllReduce(OneShot):
    """``packet``: LL16, one packet hop (small messages); ``simple``: puts plus one signal per block and peer,
    in rounds (large messages). ``launch(..., kind, op)`` take the dtype kind and reduction op codes."""

    kernels = {"packet": k.reduce_packets, "simple": k.reduce_simple}
    nparams = 3

    def launch(self, send, recv, nbytes: int, stream: int, kind: int, op: int) -> None:
        # the send stride: every peer gets the whole buffer (all-reduce) or its own slot (reduce-scatter)
        super().launch(send, recv, nbytes, stream, nbytes if self.send_all else 0, kind, op)
