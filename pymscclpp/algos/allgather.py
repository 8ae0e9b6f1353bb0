"""All-gather: one-shot all-pairs exchange of every rank's buffer into every peer's slot."""

from __future__ import annotations

from . import allgather_kernels as k
from .oneshot import OneShot


class AllGather(OneShot):
    """One-shot all-pairs all-gather: ``recv`` slot r is rank r's ``send``."""

    kernels = {"packet": k.exchange_packets, "simple": k.exchange_simple}
    recv_all = True
    nparams = 1

    def launch(self, send, recv, nbytes: int, stream: int) -> None:
        super().launch(send, recv, nbytes, stream, nbytes if self.send_all else 0)  # the send stride
