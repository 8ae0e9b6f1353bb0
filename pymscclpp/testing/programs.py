"""Random DSL programs that are valid by construction, from a plain spec hypothesis can draw and shrink.

A spec is a sequence of steps run in that order: local copies and reduces, and puts, gets, remote reduces and
LL-packet sends between two ranks over memory channels. A step between ranks a and b is fenced by a handshake
(b signals "ready", a waits; the data op; a signals "done", b waits), and a rank that moves from one thread
block to another first meets all of its thread blocks at a barrier, so every program is race- and deadlock-free
and its result is the steps' sequential result. ``repr(build(spec))`` is code that builds it again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ..language.channel import MemoryChannel
from ..language.collectives import TestCollective
from ..language.program import CollectiveProgram
from ..language.rank import Buffer, Rank
from ..plan.protocols import PACKET, SIMPLE

LOCAL_KINDS = ("copy", "reduce")
REMOTE_KINDS = ("put", "get", "remote_reduce", "packets")


class Step(NamedTuple):
    """One step. ``kind``: a local (``rank`` = a) or remote one (between ranks ``a`` and ``b`` on their
    ``channel``-th channel pair). Chunks are (buffer, index) with buffer ``i``nput, ``o``utput or ``s``cratch:
    ``dst`` on the rank written, ``src`` and ``other`` on the ranks read (``other``: reduces' second operand,
    on b for a remote reduce). A packet step sends ``src`` of a as packets to b, which unpacks them into ``dst``."""

    kind: str
    a: int
    b: int
    channel: int
    tb: int
    dst: tuple
    src: tuple
    other: tuple = ("i", 0)


@dataclass(frozen=True)
class ProgramSpec:
    """``nranks`` ranks with ``in_chunks``/``out_chunks``/``scratch_chunks`` chunks each, ``channels`` memory
    channel pairs between every two ranks, ``tbs`` thread blocks per rank, and the steps."""

    nranks: int
    in_chunks: int
    out_chunks: int
    scratch_chunks: int
    channels: int
    tbs: int
    steps: tuple

    @property
    def protocol(self) -> str:
        return PACKET if any(s.kind == "packets" for s in self.steps) else SIMPLE


class DrawnProgram(NamedTuple):
    """A built program and its spec; ``to_dict()``/``to_json()`` give its plan."""

    spec: ProgramSpec
    program: CollectiveProgram

    def to_dict(self) -> dict:
        return self.program.to_dict()

    def to_json(self) -> str:
        return self.program.to_json()

    def __repr__(self) -> str:
        return f"build({self.spec!r})"


def build(spec: ProgramSpec) -> DrawnProgram:
    """The program of ``spec`` (output chunks no step writes get a copy of input chunk 0 at the end)."""
    n = spec.nranks
    with CollectiveProgram("random", TestCollective(n, spec.in_chunks, spec.out_chunks), n,
                           protocol=spec.protocol) as prog:
        chans = {}
        for a in range(n):
            for b in range(a + 1, n):
                for k in range(spec.channels):  # made in pairs: the k-th channels each way pair up
                    chans[a, b, k], chans[b, a, k] = MemoryChannel(b, a), MemoryChannel(a, b)
        scratch = [Buffer(r, spec.scratch_chunks) for r in range(n)]
        packets = [Buffer(r, max(1, sum(s.kind == "packets" and s.b == r for s in spec.steps))) for r in range(n)]
        used_packets = [0] * n
        current_tb = [0] * n

        def chunk(rank: int, ref: tuple):
            buf = {"i": Rank(rank).get_input_buffer, "o": Rank(rank).get_output_buffer}.get(ref[0])
            return (buf() if buf else scratch[rank])[ref[1]:ref[1] + 1]

        def on_tb(rank: int, tb: int) -> int:
            if current_tb[rank] != tb and spec.tbs > 1:
                Rank(rank).barrier(list(range(spec.tbs)))
            current_tb[rank] = tb
            return tb

        written = set()
        for s in spec.steps:
            if s.kind in LOCAL_KINDS:
                me, tb = Rank(s.a), on_tb(s.a, s.tb)
                if s.kind == "copy":
                    me.copy(chunk(s.a, s.dst), chunk(s.a, s.src), tb=tb)
                else:
                    me.reduce(chunk(s.a, s.src), [chunk(s.a, s.other)], tb=tb, dst_chunk=chunk(s.a, s.dst))
                written.add((s.a, s.dst))
                continue
            a_tb, b_tb = on_tb(s.a, s.channel % spec.tbs), on_tb(s.b, s.channel % spec.tbs)
            there, back = chans[s.a, s.b, s.channel], chans[s.b, s.a, s.channel]
            back.signal(tb=b_tb)
            there.wait(tb=a_tb)
            if s.kind == "put":
                there.put(chunk(s.b, s.dst), chunk(s.a, s.src), tb=a_tb)
            elif s.kind == "get":
                there.get(chunk(s.a, s.dst), chunk(s.b, s.src), tb=a_tb)
            elif s.kind == "remote_reduce":
                there.reduce(chunk(s.a, s.src), [chunk(s.b, s.other)], tb=a_tb, local_dst_chunk=chunk(s.a, s.dst))
            else:
                slot = packets[s.b][used_packets[s.b]:used_packets[s.b] + 1]
                used_packets[s.b] += 1
                there.put_packets(slot, chunk(s.a, s.src), tb=a_tb)
                Rank(s.b).unpack_packets(chunk(s.b, s.dst), slot, tb=b_tb)
            there.signal(tb=a_tb)
            back.wait(tb=b_tb)
            written.add((s.b if s.kind in ("put", "packets") else s.a, s.dst))
        for r in range(n):
            for c in range(spec.out_chunks):
                if (r, ("o", c)) not in written:
                    Rank(r).copy(chunk(r, ("o", c)), chunk(r, ("i", 0)), tb=on_tb(r, 0))
    return DrawnProgram(spec, prog)
