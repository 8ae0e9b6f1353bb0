"""Collectives across hosts: memory channels within a host, port channels (the CPU proxy) between hosts.

``plan_for(collective, hosts, protocol)`` picks the program for a host layout (a host id per rank):

- allreduce, simple, every host with the same number of ranks L (L >= 2): ``allreduce_hierarchical``, an
  intra-host reduce-scatter over memory channels, an all-reduce between the ranks of the same local index
  over port channels, and an intra-host all-gather. Each rank sends (H - 1) / L of the message to other
  hosts, against 2 (N - L) / N for the flat program (half, for 2 hosts): meant for large messages (>= 1 MB).
- everything else (packet, uneven layouts such as 2 + 2 + 1 ranks, one rank per host, the other collectives):
  the library's all-pairs programs with port channels between hosts (``hosts=``), and ``broadcast_flat``.
  packet is meant for small messages (<= 64 KB), where one packet round beats a signal round through the proxy;
  simple for the rest.
"""

from __future__ import annotations

import json
from typing import Sequence

from ...plan.protocols import SIMPLE, protocol_name
from ..channel import MemoryChannel, PortChannel
from ..collectives import AllReduce, Collective
from ..general import JSON
from ..program import CollectiveProgram
from ..rank import Buffer, Rank
from ._common import check_args, flush_ports
from .allreduce import allreduce_allpairs
from .collectives import allgather, alltoall, reducescatter

COLLECTIVES = ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast")


def host_groups(hosts: Sequence) -> list[list[int]]:
    """The ranks of each host, hosts in order of their first rank, ranks ascending."""
    groups: dict = {}
    for r, h in enumerate(hosts):
        groups.setdefault(h, []).append(r)
    return list(groups.values())


def even_ranks_per_host(hosts: Sequence) -> int | None:
    """L when every host has L ranks, else None."""
    sizes = {len(g) for g in host_groups(hosts)}
    return sizes.pop() if len(sizes) == 1 else None


def allreduce_hierarchical(hosts: Sequence, instances: int = 1, inplace: bool = False) -> dict:
    """Allreduce for H hosts of L ranks each (L >= 2, H >= 2): rank (h, l) owns block l of the message (H chunks).

    1. handshake with every peer it writes to (they are done with the last execution);
    2. put block m of its input into host peer (h, m)'s scratch, signal, wait, reduce block l into the output;
    3. put-with-signal-and-flush block l to the same-index rank (g, l) of every other host, wait, reduce;
    4. put block l into every host peer's output, signal, wait.
    """
    groups = host_groups(hosts)
    n, h_count, local = len(hosts), len(groups), even_ranks_per_host(hosts)
    if local is None or local < 2 or h_count < 2:
        raise ValueError(f"allreduce_hierarchical needs >= 2 hosts of the same number (>= 2) of ranks, got "
                         f"{[len(g) for g in groups]}")
    check_args(n, 1, instances, SIMPLE)
    where = {r: (h, l) for h, g in enumerate(groups) for l, r in enumerate(g)}
    span = h_count  # chunks per block
    intra = (local - 1) * span  # scratch: host peers' blocks, then other hosts' blocks
    with CollectiveProgram("allreduce_hierarchical", AllReduce(n, 1, inplace), n, instances=instances,
                           protocol=SIMPLE):
        ranks = [Rank(r) for r in range(n)]
        scratch = [Buffer(r, intra + (h_count - 1) * span) for r in range(n)]
        mem = {(r, p): MemoryChannel(p, r) for g in groups for r in g for p in g if p != r}
        port = {(r, groups[g][where[r][1]]): PortChannel(groups[g][where[r][1]], r)
                for r in range(n) for g in range(h_count) if g != where[r][0]}

        def block(buf, l: int):
            return buf[l * span:(l + 1) * span]

        for r in range(n):
            h, l = where[r]
            host_peers = [p for p in groups[h] if p != r]
            far = [groups[g][l] for g in range(h_count) if g != h]
            inp, out = ranks[r].get_input_buffer(), ranks[r].get_output_buffer()
            for chans in ([mem[r, p] for p in host_peers], [port[r, p] for p in far]):
                for c in chans:
                    c.signal(tb=0)
                for c in chans:
                    c.wait(tb=0)
            for p in host_peers:
                m = where[p][1]
                at = (l if l < m else l - 1) * span
                mem[r, p].put(scratch[p][at:at + span], block(inp, m), tb=0)
            for p in host_peers:
                mem[r, p].signal(tb=0)
            for p in host_peers:
                mem[r, p].wait(tb=0)
            parts = [scratch[r][k * span:(k + 1) * span] for k in range(local - 1)]
            ranks[r].reduce(block(inp, l), parts, tb=0, dst_chunk=block(out, l))
            for p in far:
                g = where[p][0]
                at = intra + (h if h < g else h - 1) * span
                port[r, p].put_with_signal_and_flush(scratch[p][at:at + span], block(out, l), tb=0)
            for p in far:
                port[r, p].wait(tb=0)
            parts = [scratch[r][intra + k * span:intra + (k + 1) * span] for k in range(h_count - 1)]
            ranks[r].reduce(block(out, l), parts, tb=0)
            for p in host_peers:
                mem[r, p].put(block(ranks[p].get_output_buffer(), l), block(out, l), tb=0)
            for p in host_peers:
                mem[r, p].signal(tb=0)
            for p in host_peers:
                mem[r, p].wait(tb=0)
        flush_ports({(0, r, p): c for (r, p), c in port.items()})
        return json.loads(JSON())


class Broadcast(Collective):
    """Every rank ends with the input of rank ``root``."""

    name = "broadcast"

    def __init__(self, num_ranks: int, chunk_factor: int, inplace: bool, root: int = 0):
        super().__init__(num_ranks, chunk_factor, inplace)
        self.root = root

    def sizes(self) -> tuple[int, int]:
        return self.chunk_factor, self.chunk_factor


def broadcast_flat(hosts: Sequence, root: int = 0, instances: int = 1) -> dict:
    """The root puts its input into every rank's output (memory channels on its host, port channels to the
    others) and signals; each rank waits for it. A handshake first: every receiver is done with its output."""
    n = len(hosts)
    check_args(n, 1, instances, SIMPLE)
    if not 0 <= root < n:
        raise ValueError(f"root {root} is not a rank of 0..{n - 1}")
    with CollectiveProgram(f"broadcast_root{root}", Broadcast(n, 1, False, root), n, instances=instances,
                           protocol=SIMPLE):
        ranks = [Rank(r) for r in range(n)]
        ch = {}
        for p in range(n):
            if p != root:
                kind = MemoryChannel if hosts[p] == hosts[root] else PortChannel
                ch[0, root, p], ch[0, p, root] = kind(p, root), kind(root, p)
        inp = ranks[root].get_input_buffer()
        for p in range(n):
            if p != root:
                ch[0, p, root].signal(tb=0)
                ch[0, root, p].wait(tb=0)
        for p in range(n):
            if p != root:
                ch[0, root, p].put(ranks[p].get_output_buffer()[0:1], inp[0:1], tb=0)
        for p in range(n):
            if p != root:
                ch[0, root, p].signal(tb=0)
                ch[0, p, root].wait(tb=0)
        ranks[root].copy(ranks[root].get_output_buffer()[0:1], inp[0:1], tb=0)
        flush_ports(ch)
        return json.loads(JSON())


def plan_for(collective: str, hosts: Sequence, protocol: str = SIMPLE, root: int = 0, instances: int = 1) -> dict:
    """The plan (a dict in MSCCL++'s format) of ``collective`` for ranks on ``hosts`` (a host id per rank);
    ``instances`` replicates it over that many thread blocks (more SMs and more proxy triggers in flight)."""
    if collective not in COLLECTIVES:
        raise ValueError(f"collective {collective!r}: expected one of {', '.join(COLLECTIVES)}")
    protocol = protocol_name(protocol)
    hosts = list(hosts)
    n = len(hosts)
    if collective == "broadcast":
        return broadcast_flat(hosts, root, instances)
    if collective == "allreduce":
        local = even_ranks_per_host(hosts)
        if protocol == SIMPLE and local is not None and local >= 2 and len(host_groups(hosts)) >= 2:
            return allreduce_hierarchical(hosts, instances)
        return allreduce_allpairs(n, protocol=protocol, hosts=hosts, instances=instances)
    if collective == "alltoall":
        return alltoall(n, hosts=hosts, instances=instances)
    build = {"allgather": allgather, "reducescatter": reducescatter}[collective]
    return build(n, protocol=protocol, hosts=hosts, instances=instances)
