"""All-pairs allgather, reducescatter and alltoall programs (simple: puts, or packet: LL16 packets where it pays)."""

from __future__ import annotations

import json

from ..collectives import AllGather, AllToAll, ReduceScatter
from ..general import JSON
from ..program import CollectiveProgram
from ..rank import Buffer, Rank
from ...plan.protocols import PACKET, SIMPLE
from ._common import check_args, flush_ports, memory_channels, peers, slot


def _handshake(ch: dict, r: int, n: int, k: int) -> None:
    """Signal every peer, then wait for every peer: all are in this execution and done with the last one."""
    for p in peers(r, n):
        ch[k, r, p].signal(tb=k)
    for p in peers(r, n):
        ch[k, r, p].wait(tb=k)


def allgather(num_ranks: int, protocol: str = "simple", instances: int = 1, chunk_factor: int = 1,
              inplace: bool = False, instr_fusion: bool = True, auto_sync: bool = True, hosts=None) -> dict:
    """Each rank writes its input into every peer's output (simple), or into their scratch as packets (packet)."""
    protocol = check_args(num_ranks, chunk_factor, instances, protocol)
    n, cf = num_ranks, chunk_factor
    packets = protocol == PACKET
    with CollectiveProgram(f"allgather_{protocol}", AllGather(n, cf, inplace), n, instances=instances,
                           protocol=protocol, instr_fusion=instr_fusion, auto_sync=auto_sync,
                           use_double_scratch_buffer=packets):
        ranks = [Rank(r) for r in range(n)]
        scratch = [Buffer(r, (n - 1) * cf) for r in range(n)] if packets else []
        ch = memory_channels(n, cf, hosts)
        for r in range(n):
            inp, out = ranks[r].get_input_buffer(), ranks[r].get_output_buffer()
            for k in range(cf):
                mine = r * cf + k
                if not packets:
                    _handshake(ch, r, n, k)
                for p in peers(r, n):
                    if packets:
                        at = slot(p, r) * cf + k
                        ch[k, r, p].put_packets(scratch[p][at: at + 1], inp[k: k + 1], tb=k)
                    else:
                        ch[k, r, p].put(ranks[p].get_output_buffer()[mine: mine + 1], inp[k: k + 1], tb=k)
                if not inplace:
                    ranks[r].copy(out[mine: mine + 1], inp[k: k + 1], tb=k)
                if packets:
                    for p in peers(r, n):
                        at = slot(r, p) * cf + k
                        ranks[r].unpack_packets(out[p * cf + k: p * cf + k + 1], scratch[r][at: at + 1], tb=k)
                else:
                    _handshake(ch, r, n, k)
        flush_ports(ch)
        return json.loads(JSON())


def reducescatter(num_ranks: int, protocol: str = "simple", instances: int = 1, chunk_factor: int = 1,
                  inplace: bool = False, instr_fusion: bool = True, auto_sync: bool = True, hosts=None) -> dict:
    """Each rank sends part p of its input to rank p's scratch, then reduces the parts it received."""
    protocol = check_args(num_ranks, chunk_factor, instances, protocol)
    n, cf = num_ranks, chunk_factor
    packets = protocol == PACKET
    with CollectiveProgram(f"reducescatter_{protocol}", ReduceScatter(n, cf, inplace), n, instances=instances,
                           protocol=protocol, instr_fusion=instr_fusion, auto_sync=auto_sync,
                           use_double_scratch_buffer=packets):
        ranks = [Rank(r) for r in range(n)]
        scratch = [Buffer(r, (n - 1) * cf) for r in range(n)]
        ch = memory_channels(n, cf, hosts)
        for r in range(n):
            inp, out = ranks[r].get_input_buffer(), ranks[r].get_output_buffer()
            for k in range(cf):
                if not packets:
                    _handshake(ch, r, n, k)
                for p in peers(r, n):
                    at = slot(p, r) * cf + k
                    send = ch[k, r, p].put_packets if packets else ch[k, r, p].put
                    send(scratch[p][at: at + 1], inp[p * cf + k: p * cf + k + 1], tb=k)
                if not packets:
                    _handshake(ch, r, n, k)
                parts = [scratch[r][slot(r, p) * cf + k: slot(r, p) * cf + k + 1] for p in peers(r, n)]
                ranks[r].reduce(inp[r * cf + k: r * cf + k + 1], parts, tb=k, dst_chunk=out[k: k + 1], packet=packets)
        flush_ports(ch)
        return json.loads(JSON())


def alltoall(num_ranks: int, instances: int = 1, chunk_factor: int = 1, instr_fusion: bool = True,
             auto_sync: bool = True, hosts=None) -> dict:
    """Each rank writes part p of its input into slot r of rank p's output, and copies its own part locally."""
    check_args(num_ranks, chunk_factor, instances, SIMPLE)
    n, cf = num_ranks, chunk_factor
    with CollectiveProgram("alltoall", AllToAll(n, cf, False), n, instances=instances, instr_fusion=instr_fusion,
                           auto_sync=auto_sync):
        ranks = [Rank(r) for r in range(n)]
        ch = memory_channels(n, cf, hosts)
        for r in range(n):
            inp, out = ranks[r].get_input_buffer(), ranks[r].get_output_buffer()
            for k in range(cf):
                _handshake(ch, r, n, k)
                for p in peers(r, n):
                    ch[k, r, p].put(ranks[p].get_output_buffer()[r * cf + k: r * cf + k + 1],
                                    inp[p * cf + k: p * cf + k + 1], tb=k)
                ranks[r].copy(out[r * cf + k: r * cf + k + 1], inp[r * cf + k: r * cf + k + 1], tb=k)
                _handshake(ch, r, n, k)
        flush_ports(ch)
        return json.loads(JSON())
