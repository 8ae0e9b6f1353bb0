"""The exchange algorithms for ranks on several hosts (``exchange_port_kernels``): a ProxyService with two
PortChannels to every peer (data and credits, over one stage and one scratch), and the pair check on the host:
before each launch, the two ranks of every pair the call moves data between trade their descriptors over the
bootstrap, and a disagreement raises the same CallMismatchError on both, before anything is launched (a CUDA
graph checks the call it captured, not each replay).
"""

from __future__ import annotations

import struct
from collections import namedtuple

from ..channels import reduce as red
from ..errors import CallMismatchError, InvalidUsageError
from ..runtime.buffers import buffer_info
from ..runtime.fingerprint import pair_mismatch_text
from ..runtime.launch import Launch
from ..runtime.memory import alloc
from .algorithm import Algorithm, Call
from .exchange import CHUNK, GRID, bind
from .exchange_kernels import RECV_FP, ROW, SEND_FP
from .exchange_port_kernels import peer_exchange_port

_PAIR = struct.Struct("<qq")  # what I send you, what I receive from you
Unused = namedtuple("Unused", "dst")  # what reduce_slots types its (unused) channel argument with


def check_pairs(comm, table: tuple) -> None:
    """Trade descriptors with every peer the table checks (send all, then receive all: no pair waits on
    another) and raise CallMismatchError on a disagreement, on both ranks of the pair."""
    peers = [p for p in range(comm.size)
             if p != comm.rank and (table[ROW * p + SEND_FP] or table[ROW * p + RECV_FP])]
    tags = {p: comm.next_pair_tag(p) for p in peers}
    for p in peers:
        comm.bootstrap.send(_PAIR.pack(table[ROW * p + SEND_FP], table[ROW * p + RECV_FP]), p, tags[p],
                            what="the pair check's descriptors")
    for p in peers:
        blob = comm.bootstrap.recv(p, tags[p], timeout=comm.timeout_s, what="the pair check's descriptors")
        if len(blob) != _PAIR.size:
            raise InvalidUsageError(f"pair check: rank {p} sent {len(blob)} bytes, expected {_PAIR.size}")
        their_send, their_recv = _PAIR.unpack(blob)
        mine_send, mine_recv = table[ROW * p + SEND_FP], table[ROW * p + RECV_FP]
        text = None
        if their_send != mine_recv:
            text = pair_mismatch_text(comm.rank, p, mine_recv, their_send, False)
        elif their_recv != mine_send:
            text = pair_mismatch_text(comm.rank, p, mine_send, their_recv, True)
        if text is not None:
            exc = CallMismatchError(text.replace("found on the device", "found on the host, the ranks spanning "
                                                 "hosts,"))
            comm.fail(exc)
            raise exc


class PortLanes:
    """A communicator's cross-host exchange state: the proxy, its channels, stage and scratch, the launch."""

    def __init__(self, comm):
        from ..proxy import ProxyService
        self.comm, self.size = comm, comm.size
        self.stage, self.scratch = alloc(2 * comm.size * CHUNK), alloc(2 * comm.size * CHUNK)
        self.proxy = proxy = ProxyService(comm)
        src = proxy.add_memory(self.stage)
        data, credit = [], []
        for p in range(comm.size):  # pair calls in rank order on every rank
            if p != comm.rank:
                sems = proxy.add_semaphore(p), proxy.add_semaphore(p)
                dst = proxy.add_remote_memory(p, self.scratch)
                data.append(proxy.port_channel(sems[0], dst, src).device_handle())
                credit.append(proxy.port_channel(sems[1], dst, src).device_handle())
        proxy.start()
        if comm.liveness is not None:  # a dead peer ends the port waits too
            comm.liveness.on_death(lambda peer, reason: proxy.fail(f"rank {comm.rank}: peer {peer} is gone ({reason})"))
        self.address = buffer_info(self.scratch).ptr
        args = {"data": tuple(data), "credit": tuple(credit), "unused": (Unused(self.scratch),),
                "table": (0,) * (ROW * comm.size), "inp": self.scratch, "out": self.scratch, "stage": self.stage,
                "scratch": self.scratch, "chunk": CHUNK, "rank": comm.rank, "nranks": comm.size, "root": -1,
                "kind": 0, "op": 0}
        self.kernel_launch = Launch(peer_exchange_port, 1, GRID[1], args)

    def launch(self, call: Call) -> None:
        """Check the call's pairs on the host, then issue it."""
        if self.proxy.failed:
            self.proxy.check()
        check_pairs(self.comm, call.layout)
        bind(self.kernel_launch, call, self.size, self.address, self.scratch)
        self.kernel_launch.launch(call.stream)

    def close(self) -> None:
        self.proxy.close()


class CrossHostExchange(Algorithm):
    """``collective`` (an exchanged one) for ranks on two or more hosts, over PortChannels."""

    name = "cross_host"
    ops = frozenset(red.OPS)

    def __init__(self, collective: str):
        self.collective = collective
        self.lanes: PortLanes | None = None

    def why_not(self, comm, call: Call) -> str | None:
        if len(set(comm.host_ids)) < 2:
            return "serves ranks on two or more hosts (these are all on one)"
        return super().why_not(comm, call)

    def setup(self, comm) -> None:
        self.lanes = comm.extension("exchange-ports", PortLanes)

    def launch(self, call: Call) -> None:
        self.lanes.launch(call)
