"""Our own programs for the DSL features MSCCL++'s test programs exercise beyond the library: switch (NVLS)
channels, point-to-point send/recv, and plans without input or output chunks. Each returns its plan as a dict."""

from __future__ import annotations

from pymscclpp.language.channel import MemoryChannel, PortChannel, SwitchChannel
from pymscclpp.language.collectives import AllGather, AllReduce, SendRecv, TestCollective
from pymscclpp.language.internal.types import BufferType, SyncType
from pymscclpp.language.program import CollectiveProgram
from pymscclpp.language.rank import Buffer, Rank


def _handshake(ch: dict, n: int) -> None:
    """Every rank signals every peer, then waits for every peer, on thread block 0."""
    for r in range(n):
        for p in range(n):
            if p != r:
                ch[r, p].signal(tb=0)
        for p in range(n):
            if p != r:
                ch[r, p].wait(tb=0)


def nvls_allreduce(n: int, instr_fusion: bool = True, handshake_after: bool = True) -> dict:
    """In-place allreduce over one switch channel: rank r load-reduces slot r over all ranks and multicasts it."""
    with CollectiveProgram("nvls_allreduce", AllReduce(n, 1, True), n, instr_fusion=instr_fusion) as prog:
        switch = SwitchChannel(list(range(n)), BufferType.input)
        ch = {(r, p): MemoryChannel(p, r) for r in range(n) for p in range(n) if p != r}
        _handshake(ch, n)  # the previous execution is over everywhere
        for r in range(n):
            slot = Rank(r).get_input_buffer()[r:r + 1]
            switch.at_rank(r).reduce(r, 1, slot, tb=0)
            switch.at_rank(r).broadcast(slot, r, 1, tb=0)
        if handshake_after:
            _handshake(ch, n)  # every store has landed before any kernel ends
        return prog.to_dict()


def nvls_allgather_packets(n: int) -> dict:
    """LL allgather: each rank packs its input and multicasts the packets into slot r of every rank's scratch."""
    with CollectiveProgram("nvls_allgather_ll", AllGather(n, 1, False), n, protocol="LL",
                           use_double_scratch_buffer=True) as prog:
        scratch = [Buffer(r, n + 1) for r in range(n)]  # slots 0..n-1, then a staging chunk
        switch = SwitchChannel(list(range(n)), BufferType.scratch)
        for r in range(n):
            me = Rank(r)
            me.copy_packets(scratch[r][n:n + 1], me.get_input_buffer()[0:1], tb=0)
            switch.at_rank(r).broadcast_packets(scratch[r][n:n + 1], r, 1, tb=0)
            for q in range(n):
                me.unpack_packets(me.get_output_buffer()[q:q + 1], scratch[r][q:q + 1], tb=0)
        return prog.to_dict()


def sendrecv_ring(n: int, port: bool = False) -> dict:
    """Rank r's input goes into rank r+1's output; with ``port`` through port channels (put-with-signal)."""
    kind = PortChannel if port else MemoryChannel
    with CollectiveProgram("sendrecv_ring", SendRecv(n, 1, False), n) as prog:
        nxt = {r: kind((r + 1) % n, r) for r in range(n)}
        prev = {r: kind((r - 1) % n, r) for r in range(n)}
        for r in range(n):
            src, dst = Rank(r).get_input_buffer(), Rank((r + 1) % n).get_output_buffer()
            prev[r].signal(tb=0, data_sync=SyncType.none)  # ready for my predecessor's data
            nxt[r].wait(tb=0, data_sync=SyncType.after)
            if port:
                nxt[r].put_with_signal(dst[0:1], src[0:1], tb=0)
            else:
                nxt[r].put(dst[0:1], src[0:1], tb=0)
                nxt[r].signal(tb=0)
            prev[r].wait(tb=0, data_sync=SyncType.none)  # my predecessor's data has landed
        return prog.to_dict()


def scratch_exchange(n: int) -> dict:
    """No input or output chunks: neighbours exchange a scratch chunk between two handshakes."""
    with CollectiveProgram("scratch_exchange", TestCollective(n, 0, 0), n) as prog:
        scratch = [Buffer(r, 2) for r in range(n)]
        ch = {(r, p): MemoryChannel(p, r) for r in range(n) for p in range(n) if p != r}
        _handshake(ch, n)
        for r in range(n):
            p = (r + 1) % n
            ch[r, p].put(scratch[p][1:2], scratch[r][0:1], tb=0)
        _handshake(ch, n)
        return prog.to_dict()


def allgather_forward_packets(n: int, instr_fusion: bool = True) -> dict:
    """LL allgather: each rank packs its input into scratch slot r and forwards those packets to every peer."""
    with CollectiveProgram("allgather_rppkt", AllGather(n, 1, False), n, protocol="LL", instr_fusion=instr_fusion,
                           use_double_scratch_buffer=True) as prog:
        scratch = [Buffer(r, n) for r in range(n)]
        ch = {(r, p): MemoryChannel(p, r) for r in range(n) for p in range(n) if p != r}
        for r in range(n):
            me = Rank(r)
            me.copy_packets(scratch[r][r:r + 1], me.get_input_buffer()[0:1], tb=0)
            for p in range(n):
                if p != r:
                    ch[r, p].read_put_packets(scratch[p][r:r + 1], scratch[r][r:r + 1], tb=0)
            for q in range(n):
                me.unpack_packets(me.get_output_buffer()[q:q + 1], scratch[r][q:q + 1], tb=0)
        return prog.to_dict()
