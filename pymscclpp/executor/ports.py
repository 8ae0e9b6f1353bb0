"""Port channels of a plan on one rank: semaphores and channel handles through the executor's ProxyService,
and the proxy memory ids a call's kernel puts from and into.

Every setup step is a pair call of the ProxyService, made with the peers in ascending order on every rank
(so no two ranks wait on each other in a cycle). The k-th port channel from a to b pairs with the k-th
from b to a, as MSCCL++ connects them. Triggers name memories per op, so a channel's own ``dst_id`` and
``src_id`` are unused (0).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..proxy.port_channel import PortChannel
from .plan import ExecutionPlan

LOCAL_IDS = "ios"  # ids[0:3]: this rank's input, output and scratch; ids[3 + j]: remote buffer j


class PlanPorts:
    """Per plan: a proxy semaphore per port channel pair and the device handle of each port channel."""

    def __init__(self, proxy, xplan: ExecutionPlan, rank: int):
        self.proxy = proxy
        sems = {(p, k): proxy.add_semaphore(p) for p in xplan.peers(rank, "port")
                for k in range(xplan.tokens(rank, p, "port"))}
        channels = xplan.plan.gpus[rank].channels.get("port", [])
        self.handles = [PortChannel(proxy, sems[xplan.token(rank, c, "port")], 0, 0).device_handle()
                        for c in range(len(channels))]


def exchange(proxy, xplan: ExecutionPlan, rank: int, codes: str, buffers: dict) -> dict:
    """Expose ``buffers[code]`` to each port peer that reaches it (pair calls, ascending peers); the proxy
    ids of the peers' buffers, by (peer, code)."""
    out = {}
    for p in xplan.peers(rank, "port"):
        for code in xplan.exchanged(rank, p, "port"):
            if code in codes:
                out[p, code] = proxy.add_remote_memory(p, buffers[code])
    return out


def memory_ids(proxy, xplan: ExecutionPlan, rank: int, local: dict, remote: dict):
    """The device array of proxy memory ids a kernel's port ops name (see ``LOCAL_IDS``)."""
    gpu = xplan.plan.gpus[rank]
    ids = [proxy.add_memory(local[c]) for c in LOCAL_IDS]
    ids += [remote.get((rb.rank, rb.type), 0) for rb in gpu.remote_buffers]
    return cuda.to_device(np.array(ids, np.int64))


def host_of(host_ids: list, rank: int) -> str:
    """``host K``: the K-th distinct host in rank order (host ids are hashes, so they are numbered)."""
    return f"host {list(dict.fromkeys(host_ids)).index(host_ids[rank])}"


def host_layout(host_ids: list) -> str:
    """Which ranks each host holds, e.g. ``host 0: ranks [0, 1]; host 1: ranks [2]``."""
    order = list(dict.fromkeys(host_ids))
    return "; ".join(f"host {k}: ranks {[r for r, h in enumerate(host_ids) if h == hid]}"
                     for k, hid in enumerate(order))
