"""DSL programs that use what the library programs do not: thread-block groups, pipelines, barriers,
semaphores, relaxed signals, get, copy/read-put packets, and a packet reduce that copies its result as packets.

Each returns a plan dict for ``n`` ranks; the interpreter checks them like any plan.
"""

from __future__ import annotations

import json

from pymscclpp.language.channel import MemoryChannel
from pymscclpp.language.collectives import AllGather, AllReduce, ReduceScatter, TestCollective
from pymscclpp.language.general import JSON
from pymscclpp.language.loop import LoopIterationContext
from pymscclpp.language.program import CollectiveProgram
from pymscclpp.language.rank import Buffer, Rank, Semaphore
from pymscclpp.language.thread_block_group import ThreadBlockGroup


def _peers(r: int, n: int) -> list[int]:
    return [p for p in range(n) if p != r]


def _slot(owner: int, sender: int) -> int:
    return sender if sender < owner else sender - 1


def _handshake(ch: dict, r: int, n: int) -> None:
    """Rank ``r``'s thread block 0 signals every peer, then waits for each: no rank passes until all arrive."""
    for p in _peers(r, n):
        ch[r, p].signal(tb=0)
    for p in _peers(r, n):
        ch[r, p].wait(tb=0)


def allgather_groups(n: int, unit: int = 64) -> dict:
    """Two thread blocks split a pipelined put and copy; a semaphore and a barrier order them around tb 0's
    handshakes (the first one relaxed)."""
    with CollectiveProgram("allgather_groups", AllGather(n, 1, False), n):
        ch = {(r, p): MemoryChannel(p, r) for r in range(n) for p in _peers(r, n)}
        group = ThreadBlockGroup([0, 1])
        for r in range(n):
            me = Rank(r)
            inp, out = me.get_input_buffer(), me.get_output_buffer()
            sem = Semaphore(r, 0)
            for p in _peers(r, n):
                ch[r, p].signal(tb=0, relaxed=True)
            for p in _peers(r, n):
                ch[r, p].wait(tb=0, relaxed=True)
            sem.release(tb=0)
            sem.acquire(tb=1)
            with LoopIterationContext(unit, 1):
                for p in _peers(r, n):
                    ch[r, p].put(Rank(p).get_output_buffer()[r:r + 1], inp[0:1], tb_group=group)
                me.copy(out[r:r + 1], inp[0:1], tb_group=group)
            me.barrier([0, 1])
            _handshake(ch, r, n)
        return json.loads(JSON())


def allgather_get(n: int) -> dict:
    """Each rank reads every peer's input into its own output (get), between two handshakes."""
    with CollectiveProgram("allgather_get", AllGather(n, 1, False), n):
        ch = {(r, p): MemoryChannel(p, r) for r in range(n) for p in _peers(r, n)}
        for r in range(n):
            me = Rank(r)
            inp, out = me.get_input_buffer(), me.get_output_buffer()
            _handshake(ch, r, n)
            for p in _peers(r, n):
                ch[r, p].get(out[p:p + 1], Rank(p).get_input_buffer()[0:1], tb=0)
            me.copy(out[r:r + 1], inp[0:1], tb=0)
            _handshake(ch, r, n)
        return json.loads(JSON())


def allgather_forward(n: int) -> dict:
    """LL: a rank packs its input into its own scratch, forwards those packets to every peer, and unpacks
    what the peers forwarded."""
    with CollectiveProgram("allgather_forward", AllGather(n, 1, False), n, protocol="LL",
                           use_double_scratch_buffer=True):
        ch = {(r, p): MemoryChannel(p, r) for r in range(n) for p in _peers(r, n)}
        scratch = [Buffer(r, n) for r in range(n)]
        for r in range(n):
            me = Rank(r)
            inp, out = me.get_input_buffer(), me.get_output_buffer()
            me.copy_packets(scratch[r][0:1], inp[0:1], tb=0)
            for p in _peers(r, n):
                at = 1 + _slot(p, r)
                ch[r, p].read_put_packets(scratch[p][at:at + 1], scratch[r][0:1], tb=0)
            me.copy(out[r:r + 1], inp[0:1], tb=0)
            for p in _peers(r, n):
                at = 1 + _slot(r, p)
                me.unpack_packets(out[p:p + 1], scratch[r][at:at + 1], tb=0)
        return json.loads(JSON())


def reducescatter_groups(n: int) -> dict:
    """LL reduce-scatter whose packet puts and packet reduce are split over a group of two thread blocks."""
    with CollectiveProgram("reducescatter_groups", ReduceScatter(n, 1, False), n, protocol="LL",
                           use_double_scratch_buffer=True):
        ch = {(r, p): MemoryChannel(p, r) for r in range(n) for p in _peers(r, n)}
        scratch = [Buffer(r, n - 1) for r in range(n)]
        group = ThreadBlockGroup([0, 1])
        for r in range(n):
            me = Rank(r)
            inp, out = me.get_input_buffer(), me.get_output_buffer()
            for p in _peers(r, n):
                at = _slot(p, r)
                ch[r, p].put_packets(scratch[p][at:at + 1], inp[p:p + 1], tb_group=group)
            parts = [scratch[r][_slot(r, p):_slot(r, p) + 1] for p in _peers(r, n)]
            me.reduce(inp[r:r + 1], parts, tb_group=group, dst_chunk=out[0:1], packet=True)
        return json.loads(JSON())


def allreduce_forward(n: int) -> dict:
    """LL all-reduce: reduce my part from the peers' packets, keep the result as packets in my scratch
    (a fused reduce + copy-packets), forward them to every peer, and unpack the peers' results."""
    with CollectiveProgram("allreduce_forward", AllReduce(n, 1, False), n, protocol="LL",
                           use_double_scratch_buffer=True):
        ch = {(r, p): MemoryChannel(p, r) for r in range(n) for p in _peers(r, n)}
        scratch = [Buffer(r, 2 * n - 1) for r in range(n)]
        own = 2 * n - 2  # where a rank keeps its reduced part as packets
        for r in range(n):
            me = Rank(r)
            inp, out = me.get_input_buffer(), me.get_output_buffer()
            for p in _peers(r, n):
                at = _slot(p, r)
                ch[r, p].put_packets(scratch[p][at:at + 1], inp[p:p + 1], tb=0)
            parts = [scratch[r][_slot(r, p):_slot(r, p) + 1] for p in _peers(r, n)]
            me.reduce(inp[r:r + 1], parts, tb=0, dst_chunk=out[r:r + 1], packet=True)
            me.copy_packets(scratch[r][own:own + 1], out[r:r + 1], tb=0)
            for p in _peers(r, n):
                at = n - 1 + _slot(p, r)
                ch[r, p].read_put_packets(scratch[p][at:at + 1], scratch[r][own:own + 1], tb=0)
            for p in _peers(r, n):
                at = n - 1 + _slot(r, p)
                me.unpack_packets(out[p:p + 1], scratch[r][at:at + 1], tb=0)
        return json.loads(JSON())


def allgather_scattered(n: int, order: tuple[int, ...] = (2, 0, 3, 1)) -> dict:
    """Thread block t sends input chunk ``order[t]`` to every peer (blocks alike but for chunk numbers in no
    affine order: the executor's constant tables); one more block copies the rank's own slot."""
    k = len(order)
    with CollectiveProgram("allgather_scattered", AllGather(n, k, False), n):
        ch = {(r, p, t): MemoryChannel(p, r) for r in range(n) for p in _peers(r, n) for t in range(k)}
        for r in range(n):
            me = Rank(r)
            inp, out = me.get_input_buffer(), me.get_output_buffer()
            for t, c in enumerate(order):
                for p in _peers(r, n):
                    ch[r, p, t].signal(tb=t)
                for p in _peers(r, n):
                    ch[r, p, t].wait(tb=t)
                for p in _peers(r, n):
                    ch[r, p, t].put(Rank(p).get_output_buffer()[k * r + c:k * r + c + 1], inp[c:c + 1], tb=t)
                    ch[r, p, t].signal(tb=t)
                for p in _peers(r, n):
                    ch[r, p, t].wait(tb=t)
            me.copy(out[k * r:k * r + k], inp[0:k], tb=k)
        return json.loads(JSON())


FEATURE_PROGRAMS = {"allgather_groups": allgather_groups, "allgather_get": allgather_get,
                    "allgather_forward": allgather_forward, "reducescatter_groups": reducescatter_groups,
                    "allreduce_forward": allreduce_forward, "allgather_scattered": allgather_scattered}


def allgather_port(n: int) -> dict:
    """All-pairs allgather over port channels only (proxy puts with signal and flush), whatever the hosts."""
    from pymscclpp.language.channel import PortChannel
    with CollectiveProgram("allgather_port", AllGather(n, 1, False), n):
        ch = {(r, p): PortChannel(p, r) for r in range(n) for p in _peers(r, n)}
        for r in range(n):
            me = Rank(r)
            inp, out = me.get_input_buffer(), me.get_output_buffer()
            _handshake(ch, r, n)
            for p in _peers(r, n):
                ch[r, p].put_with_signal_and_flush(Rank(p).get_output_buffer()[r:r + 1], inp[0:1], tb=0)
            me.copy(out[r:r + 1], inp[0:1], tb=0)
            for p in _peers(r, n):
                ch[r, p].wait(tb=0)
        return json.loads(JSON())


def rank0_only(n: int) -> dict:
    """Only rank 0 has work (a copy within its input); the other ranks' plans have no thread blocks."""
    with CollectiveProgram("rank0_only", TestCollective(n, 2, 0), n) as prog:
        inp = Rank(0).get_input_buffer()
        Rank(0).copy(inp[1:2], inp[0:1], tb=0)
        return prog.to_dict()
