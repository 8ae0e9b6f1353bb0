"""Allreduce programs: all-pairs (simple and packet) and reduce-scatter + all-gather by direct reads."""

from __future__ import annotations

import json

from ..collectives import AllReduce
from ..general import JSON
from ..program import CollectiveProgram
from ..rank import Buffer, Rank
from ...plan.protocols import PACKET, SIMPLE
from ._common import check_args, flush_ports, memory_channels, peers, slot


def allreduce_allpairs(num_ranks: int, protocol: str = "simple", instances: int = 1, chunk_factor: int = 1,
                       inplace: bool = False, instr_fusion: bool = True, auto_sync: bool = True, hosts=None) -> dict:
    """Every rank sends part p of its input to rank p's scratch, reduces its own part, and sends the result back.

    Thread block k handles chunk k of every part. simple: handshake, put, signal/wait, reduce-send, signal/wait.
    packet: packets into the peers' scratch, a packet reduce that sends packets on, and unpacking; no semaphores.
    """
    protocol = check_args(num_ranks, chunk_factor, instances, protocol)
    n, cf = num_ranks, chunk_factor
    packets = protocol == PACKET
    with CollectiveProgram(f"allreduce_allpairs_{protocol}", AllReduce(n, cf, inplace), n, instances=instances,
                           protocol=protocol, instr_fusion=instr_fusion, auto_sync=auto_sync,
                           use_double_scratch_buffer=packets):
        ranks = [Rank(r) for r in range(n)]
        scratch = [Buffer(r, (2 if packets else 1) * (n - 1) * cf) for r in range(n)]
        ch = memory_channels(n, cf, hosts)
        back = (n - 1) * cf  # packet: where reduced parts come back
        for r in range(n):
            inp, out = ranks[r].get_input_buffer(), ranks[r].get_output_buffer()
            for k in range(cf):
                mine = r * cf + k
                if not packets:
                    for p in peers(r, n):
                        ch[k, r, p].signal(tb=k)
                    for p in peers(r, n):
                        ch[k, r, p].wait(tb=k)
                for p in peers(r, n):
                    dst = scratch[p][slot(p, r) * cf + k: slot(p, r) * cf + k + 1]
                    send = ch[k, r, p].put_packets if packets else ch[k, r, p].put
                    send(dst, inp[p * cf + k: p * cf + k + 1], tb=k)
                if not packets:
                    for p in peers(r, n):
                        ch[k, r, p].signal(tb=k)
                    for p in peers(r, n):
                        ch[k, r, p].wait(tb=k)
                parts = [scratch[r][slot(r, p) * cf + k: slot(r, p) * cf + k + 1] for p in peers(r, n)]
                ranks[r].reduce(inp[mine: mine + 1], parts, tb=k, dst_chunk=out[mine: mine + 1], packet=packets)
                for p in peers(r, n):
                    if packets:
                        at = back + slot(p, r) * cf + k
                        ch[k, r, p].put_packets(scratch[p][at: at + 1], out[mine: mine + 1], tb=k)
                    else:
                        ch[k, r, p].put(ranks[p].get_output_buffer()[mine: mine + 1], out[mine: mine + 1], tb=k)
                if packets:
                    for p in peers(r, n):
                        at = back + slot(r, p) * cf + k
                        ranks[r].unpack_packets(out[p * cf + k: p * cf + k + 1], scratch[r][at: at + 1], tb=k)
                else:
                    for p in peers(r, n):
                        ch[k, r, p].signal(tb=k)
                    for p in peers(r, n):
                        ch[k, r, p].wait(tb=k)
        flush_ports(ch)
        return json.loads(JSON())


def allreduce_rsag(num_ranks: int, instances: int = 1, chunk_factor: int = 1, inplace: bool = False,
                   instr_fusion: bool = True, auto_sync: bool = True) -> dict:
    """Reduce-scatter by reading the peers' inputs directly, then all-gather by writing the peers' outputs.

    Thread block k of rank r: handshake; copy its part's chunk k to the output; read-reduce the same chunk
    from every peer's input; write the result into every peer's output; signal/wait for completion.
    """
    check_args(num_ranks, chunk_factor, instances, SIMPLE)
    n, cf = num_ranks, chunk_factor
    with CollectiveProgram("allreduce_rsag", AllReduce(n, cf, inplace), n, instances=instances,
                           instr_fusion=instr_fusion, auto_sync=auto_sync):
        ranks = [Rank(r) for r in range(n)]
        ch = memory_channels(n, cf)
        for r in range(n):
            inp, out = ranks[r].get_input_buffer(), ranks[r].get_output_buffer()
            for k in range(cf):
                mine = r * cf + k
                for p in peers(r, n):
                    ch[k, r, p].signal(tb=k)
                for p in peers(r, n):
                    ch[k, r, p].wait(tb=k)
                if not inplace:
                    ranks[r].copy(out[mine: mine + 1], inp[mine: mine + 1], tb=k)
                for p in peers(r, n):
                    remote = ranks[p].get_input_buffer()[mine: mine + 1]
                    ch[k, r, p].reduce(out[mine: mine + 1], [remote], tb=k)
                for p in peers(r, n):
                    ch[k, r, p].put(ranks[p].get_output_buffer()[mine: mine + 1], out[mine: mine + 1], tb=k)
                for p in peers(r, n):
                    ch[k, r, p].signal(tb=k)
                for p in peers(r, n):
                    ch[k, r, p].wait(tb=k)
        return json.loads(JSON())
