"""Reduce-scatter over the one-shot set-up: rank r gets every rank's slot r reduced in rank order."""

from __future__ import annotations

from .allreduce import AllReduce


class ReduceScatter(AllReduce):
    """One-shot all-pairs reduce-scatter: the all-reduce kernels with slot p of ``send`` going to rank p."""

    send_all = True
