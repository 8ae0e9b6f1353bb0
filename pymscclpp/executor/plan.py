"""ExecutionPlan: a validated plan plus what the executor derives from it once (hash, peers, tokens, features).

Checks here need only the plan; checks against a communicator (ranks, hosts, semaphores, scratch) are in
``Executor``. Either way a plan the executor cannot run fails before anything is set up or launched.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cached_property

from ..plan.opcodes import DATA_OPS, PACKET_ROLES, roles
from ..plan import Plan, PlanError, load_plan

MAX_THREADS_PER_BLOCK = 1024
PACKET_DATA = 8  # data bytes of one LL16 packet: packet windows must start on a packet


class ExecutionPlan:
    """A plan the executor runs; build it with ``from_file``, ``from_json`` or ``from_plan``."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self._check()

    @classmethod
    def from_file(cls, path: "str | os.PathLike") -> "ExecutionPlan":
        """Load a plan file (MSCCL++ v0.8 JSON, from either DSL)."""
        with open(path, encoding="utf-8") as f:
            return cls(load_plan(json.loads(f.read())))

    @classmethod
    def from_json(cls, text: str) -> "ExecutionPlan":
        """Load a plan from JSON text."""
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise PlanError(f"<plan>: not valid JSON: {e}") from None
        return cls(load_plan(obj))

    @classmethod
    def from_plan(cls, source: "Plan | dict | str | os.PathLike | ExecutionPlan") -> "ExecutionPlan":
        """Wrap anything ``load_plan`` accepts (or return an ExecutionPlan as is)."""
        return source if isinstance(source, ExecutionPlan) else cls(load_plan(source))

    @property
    def name(self) -> str:
        return self.plan.name

    @property
    def num_ranks(self) -> int:
        return self.plan.num_ranks

    @cached_property
    def key(self) -> str:
        """Hash of the plan's canonical JSON: the identity of its kernels and resources."""
        text = json.dumps(self.plan.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    # -- what the plan uses ----------------------------------------------------------------------

    def ops(self, rank: int):
        """(thread block, op) of every op of ``rank``, pipeline bodies included."""
        for tb in self.plan.gpus[rank].threadblocks:
            for op in tb.ops:
                yield tb, op
                for inner in op.ops:
                    yield tb, inner

    @cached_property
    def uses_packets(self) -> bool:
        """Any op of any rank keeps LL packets in scratch (then scratch chunks are 2x wide everywhere)."""
        return any(role in PACKET_ROLES for r in range(self.num_ranks) for _, op in self.ops(r)
                   if op.name in DATA_OPS for role in sum(roles(op.name, len(op.src_buff), len(op.dst_buff)), []))

    @cached_property
    def reduces(self) -> bool:
        """Any op combines sources: the executor then needs a dtype it can reduce."""
        return any(op.name in DATA_OPS and DATA_OPS[op.name].reduces
                   for r in range(self.num_ranks) for _, op in self.ops(r))

    def channel_counts(self, rank: int, peer: int, kind: str = "memory") -> int:
        """Channels of type ``kind`` (memory or port) from ``rank`` to ``peer``."""
        return self.plan.gpus[rank].channels.get(kind, []).count(peer)

    def peers(self, rank: int, kind: str = "memory") -> list[int]:
        """Ranks ``rank`` shares a ``kind`` channel with, in either direction, ascending."""
        return sorted(p for p in range(self.num_ranks)
                      if p != rank and (self.channel_counts(rank, p, kind) or self.channel_counts(p, rank, kind)))

    def tokens(self, rank: int, peer: int, kind: str = "memory") -> int:
        """Semaphores between ``rank`` and ``peer`` for ``kind`` channels: the k-th channel each way pairs on
        the k-th."""
        return max(self.channel_counts(rank, peer, kind), self.channel_counts(peer, rank, kind))

    def token(self, rank: int, channel: int, kind: str = "memory") -> tuple[int, int]:
        """(peer, token index) of ``rank``'s ``kind`` channel ``channel``."""
        peers = self.plan.gpus[rank].channels[kind]
        return peers[channel], peers[:channel].count(peers[channel])

    def needs_remote(self, rank: int, peer: int, code: str, kind: str = "memory") -> bool:
        """``rank`` reaches ``peer``'s buffer ``code`` (``i``, ``o`` or ``s``) through ``kind`` channels."""
        return any(rb.rank == peer and rb.type == code and kind in rb.access_channel_types
                   for rb in self.plan.gpus[rank].remote_buffers)

    def exchanged(self, rank: int, peer: int, kind: str = "memory") -> list[str]:
        """Buffers the pair swaps for ``kind`` channels (the same list on both sides): those either side
        reaches on the other."""
        return [c for c in "ios" if self.needs_remote(rank, peer, c, kind) or self.needs_remote(peer, rank, c, kind)]

    @cached_property
    def uses_ports(self) -> bool:
        """Some rank has a port channel: the executor then runs a proxy."""
        return any(g.channels.get("port") for g in self.plan.gpus)

    def staging_chunks(self, rank: int) -> int:
        """Scratch chunks (packet-wide) of ``rank``'s port put-packets staging slots."""
        return sum(sum(r.size for r in op.src_buff) for _, op in self.ops(rank)
                   if op.name == "ppkt" and op.channel_type == "port")

    @cached_property
    def remote_io(self) -> bool:
        """Some rank writes or reads a peer's input or output: user buffers then need registering."""
        return any(rb.type in "io" for g in self.plan.gpus for rb in g.remote_buffers)

    @cached_property
    def barrier_ids(self) -> list[int]:
        return sorted({op.barrier_id for r in range(self.num_ranks) for _, op in self.ops(r) if op.name == "barrier"})

    # -- plan-only checks --------------------------------------------------------------------------

    def _fail(self, where: str, reason: str) -> PlanError:
        return PlanError(f"{where}: {reason} (plan {self.name!r})")

    def _check(self) -> None:
        plan = self.plan
        if plan.num_threads_per_block > MAX_THREADS_PER_BLOCK:
            raise self._fail("num_threads_per_block", f"{plan.num_threads_per_block} exceeds the "
                             f"{MAX_THREADS_PER_BLOCK} threads a CUDA block can have")
        for g in plan.gpus:
            if g.switch_channels:
                raise self._fail(f"gpus[{g.id}].channels", "switch channels need NVLS multicast memory, which the "
                                 "executor does not create; run the plan with the interpreter (verify) instead")
            for tb in g.threadblocks:
                for i, op in enumerate(tb.ops):
                    where = f"gpus[{g.id}].threadblocks[{tb.id}].ops[{i}]"
                    if op.name == "pipeline" and self.uses_packets and op.iter_context[0] % PACKET_DATA:
                        raise self._fail(f"{where}.iter_context.unit_size",
                                         f"{op.iter_context[0]} is not a multiple of {PACKET_DATA} bytes, so "
                                         "pipeline slices would split LL packets")
