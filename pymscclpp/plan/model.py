"""Execution plans in MSCCL++'s JSON format (the v0.8 DSL's output), as dataclasses that print back to JSON.

``loader.load_plan`` builds them from JSON and validates every field; the DSL emits them; the interpreter and
the executor read them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .protocols import PLAN_SPELLING

BUFFER_CODES = ("i", "o", "s")
CHANNEL_TYPES = ("memory", "port")  # point-to-point channels
SWITCH = "switch"  # an NVLS channel over a group of ranks
REDUCE_OPS = ("sum", "min", "max")
MAX_MESSAGE_SIZE = 2**64 - 1


class PlanError(ValueError):
    """A plan is malformed; the message starts with the JSON path of the offending field."""


@dataclass
class BufferRef:
    """A chunk range named by an op: local (``type`` set), remote (``buffer_id`` into the thread block's refs),
    or the range of every group rank of a switch channel (``switch_channel_id`` into the thread block's
    switch channels). ``rank`` is kept when the plan names it (MSCCL++ writes it on switch ops' local chunks)."""

    index: int
    size: int
    type: str | None = None
    buffer_id: int | None = None
    switch_channel_id: int | None = None
    rank: int | None = None

    @property
    def remote(self) -> bool:
        return self.buffer_id is not None

    @property
    def switch(self) -> bool:
        return self.switch_channel_id is not None

    def to_dict(self) -> dict:
        if self.switch:
            head = {"switch_channel_id": self.switch_channel_id}
        else:
            head = {"buffer_id": self.buffer_id} if self.remote else {"type": self.type}
            if self.rank is not None:
                head = {"rank": self.rank, **head}
        return {**head, "index": self.index, "size": self.size}


@dataclass
class Op:
    """One instruction of a thread block; fields that an op code does not use stay empty."""

    name: str
    src_buff: list[BufferRef] = field(default_factory=list)
    dst_buff: list[BufferRef] = field(default_factory=list)
    channel_type: str | None = None
    channel_ids: list[int] = field(default_factory=list)
    reduce_op: str | None = None
    tbg: tuple[int, int] | None = None  # (tb_id, tbg_size)
    barrier_id: int | None = None
    num_threadblocks: int | None = None
    semaphore_ids: list[int] = field(default_factory=list)
    iter_context: tuple[int, int] | None = None  # (unit_size bytes, num_chunks)
    ops: list["Op"] = field(default_factory=list)
    buffer_type: str | None = None  # glre: the switch channel's buffer, as MSCCL++ writes it

    def to_dict(self) -> dict:
        if self.name == "glre":  # MSCCL++'s own shape for an unfused multimem load-reduce
            src, dst = self.src_buff[0], self.dst_buff[0]
            return {"name": "glre", "buffer_type": self.buffer_type, "buffer_offset": src.index, "size": src.size,
                    "dst_chunk": {"rank": dst.rank, "type": dst.type, "index": dst.index, "size": dst.size},
                    "channel_ids": [src.switch_channel_id], "channel_type": SWITCH, "reduce_op": self.reduce_op}
        out: dict[str, Any] = {"name": self.name}
        if self.src_buff:
            out["src_buff"] = [b.to_dict() for b in self.src_buff]
        if self.dst_buff:
            out["dst_buff"] = [b.to_dict() for b in self.dst_buff]
        if self.channel_ids:
            out["channel_ids"] = list(self.channel_ids)
        if self.channel_type is not None:
            out["channel_type"] = self.channel_type
        if self.reduce_op is not None:
            out["reduce_op"] = self.reduce_op
        if self.tbg is not None:
            out["tbg_info"] = {"tb_id": self.tbg[0], "tbg_size": self.tbg[1]}
        if self.barrier_id is not None:
            out["barrier_id"] = self.barrier_id
            out["num_threadblocks"] = self.num_threadblocks
        if self.semaphore_ids:
            out["semaphore_ids"] = list(self.semaphore_ids)
        if self.iter_context is not None:
            out["iter_context"] = {"unit_size": self.iter_context[0], "num_chunks": self.iter_context[1]}
            out["ops"] = [op.to_dict() for op in self.ops]
        return out


@dataclass
class ThreadBlock:
    """A thread block: ordered ops, and the gpu-level channels / remote buffers its ops index into."""

    id: int
    ops: list[Op]
    channels: dict[str, list[int]]  # channel type -> gpu channel indices; an op's channel id is a position here
    remote_buffer_refs: dict[str, list[int]]  # access channel type -> gpu remote buffer ids

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "ops": [op.to_dict() for op in self.ops],
            "channels": [{"channel_type": t, "channel_ids": ids} for t, ids in self.channels.items() if ids],
            "remote_buffer_refs": [
                {"access_channel_type": t, "remote_buffer_ids": ids} for t, ids in self.remote_buffer_refs.items() if ids
            ],
        }


@dataclass
class RemoteBuffer:
    """A peer's buffer this gpu accesses, and the channel types it is reached through."""

    rank: int
    type: str
    access_channel_types: list[str]

    def to_dict(self) -> dict:
        return {"rank": self.rank, "type": self.type, "access_channel_types": list(self.access_channel_types)}


@dataclass
class SwitchChannel:
    """An NVLS channel: buffer ``buffer_type`` of every rank in ``ranks``, reached through one multicast address."""

    buffer_type: str
    ranks: list[int]

    def to_dict(self) -> dict:
        return {"channel_type": SWITCH, "buffer_type": self.buffer_type,
                "rank_groups": [{"size": len(self.ranks), "ranks": list(self.ranks)}]}


@dataclass
class Gpu:
    """One rank of the plan."""

    id: int
    input_chunks: int
    output_chunks: int
    scratch_chunks: int
    threadblocks: list[ThreadBlock]
    channels: dict[str, list[int]]  # channel type -> peer of each gpu channel, in channel-index order
    remote_buffers: list[RemoteBuffer]
    semaphores: list[int]  # initial values
    switch_channels: list[SwitchChannel] = field(default_factory=list)

    def chunks(self, buffer_code: str) -> int:
        """Number of chunks of buffer ``"i"``, ``"o"`` or ``"s"``."""
        return {"i": self.input_chunks, "o": self.output_chunks, "s": self.scratch_chunks}[buffer_code]

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "input_chunks": self.input_chunks,
            "output_chunks": self.output_chunks,
            "scratch_chunks": self.scratch_chunks,
            "threadblocks": [tb.to_dict() for tb in self.threadblocks],
            "channels": [{"channel_type": t, "connected_to": peers} for t, peers in self.channels.items() if peers]
            + [sc.to_dict() for sc in self.switch_channels],
            "remote_buffers": [rb.to_dict() for rb in self.remote_buffers],
            "semaphores": [{"init_value": v} for v in self.semaphores],
        }


@dataclass
class Plan:
    """A whole execution plan: global settings and one ``Gpu`` per rank (``gpus[r].id == r``)."""

    name: str
    collective: str
    protocol: str  # "packet" or "simple" (a plan file's "LL" or "Simple": ``protocols``)
    inplace: bool
    gpus: list[Gpu]
    reuse_resources: bool = False
    num_threads_per_block: int = 1024
    use_double_scratch_buffer: bool = False
    buffer_alignment: int = 16
    min_message_size: int = 0
    max_message_size: int = MAX_MESSAGE_SIZE

    @property
    def num_ranks(self) -> int:
        return len(self.gpus)

    def remote_buffer(self, rank: int, tb: int, channel_type: str, buffer_id: int) -> RemoteBuffer:
        """The peer buffer that ``buffer_id`` names in an op of ``channel_type`` on thread block ``tb``."""
        gpu = self.gpus[rank]
        return gpu.remote_buffers[gpu.threadblocks[tb].remote_buffer_refs[channel_type][buffer_id]]

    def switch_channel(self, rank: int, tb: int, switch_channel_id: int) -> SwitchChannel:
        """The switch channel that ``switch_channel_id`` names in an op of thread block ``tb``."""
        gpu = self.gpus[rank]
        return gpu.switch_channels[gpu.threadblocks[tb].channels[SWITCH][switch_channel_id]]

    def channel(self, rank: int, tb: int, channel_type: str, channel_id: int) -> int:
        """The gpu-level channel index behind thread block ``tb``'s channel ``channel_id``."""
        return self.gpus[rank].threadblocks[tb].channels[channel_type][channel_id]

    def paired_channel(self, rank: int, channel_type: str, channel: int) -> tuple[int, int | None]:
        """(peer, peer's channel index) of the other end of a channel; the k-th channel from a to b
        pairs with the k-th channel from b to a, as the MSCCL++ executor connects them. None: no partner."""
        peers = self.gpus[rank].channels.get(channel_type, [])
        peer = peers[channel]
        occurrence = peers[:channel].count(peer)
        back = [i for i, p in enumerate(self.gpus[peer].channels.get(channel_type, [])) if p == rank]
        return peer, (back[occurrence] if occurrence < len(back) else None)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "collective": self.collective,
            "protocol": PLAN_SPELLING[self.protocol],
            "inplace": self.inplace,
            "reuse_resources": self.reuse_resources,
            "gpus": [gpu.to_dict() for gpu in self.gpus],
            "num_threads_per_block": self.num_threads_per_block,
            "use_double_scratch_buffer": self.use_double_scratch_buffer,
            "buffer_alignment": self.buffer_alignment,
            "min_message_size": self.min_message_size,
            "max_message_size": self.max_message_size,
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)
