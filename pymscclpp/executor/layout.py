"""How a message maps onto a plan's chunks: chunk size, padding, and where each user part sits.

A collective splits each rank's input and output into *parts* (allgather: one input part, ``n`` output
parts, each one rank's contribution). A plan splits each part into the same number of chunks. When a part
does not split into whole chunks of the alignment the kernel needs (odd element counts), each part is padded
at its end to whole chunks; the executor then runs on its own buffers and copies parts in and out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..plan.layout import IoLayout, io_layout
from ..plan import PlanError
from .plan import ExecutionPlan

VECTOR_BYTES = 16  # chunks are whole 16-byte vectors, so copies and LL16 packets stay aligned
SMALL_CHUNK = 4096  # up to this chunk size a kernel has the chunk size built in


def _parts(collective: str, n: int) -> tuple[int, int] | None:
    """(input parts, output parts) of a collective; None when the executor knows no part structure."""
    return {"allreduce": (1, 1), "allgather": (1, n), "reducescatter": (n, 1), "alltoall": (n, n),
            "broadcast": (1, 1), "sendrecv": (1, 1)}.get(collective)


@dataclass(frozen=True)
class MessageLayout:
    """A message of ``part`` user bytes per part, in a kernel whose chunks are ``chunk`` bytes."""

    chunk: int
    part: int
    in_parts: int
    out_parts: int
    chunks_per_part: int
    io: IoLayout  # chunk offsets of input and output when the plan is in place

    @property
    def padded_part(self) -> int:
        return self.chunks_per_part * self.chunk

    @property
    def exact(self) -> bool:
        """User buffers are the kernel's buffers as they are (no padding)."""
        return self.padded_part == self.part

    @property
    def size_class(self) -> int:
        """The chunk size when small enough to build into the kernel, else 0 (a kernel argument)."""
        return self.chunk if self.chunk <= SMALL_CHUNK else 0

    @property
    def bucket(self) -> int:
        """Chunk size buffers are allocated for: the next power of two, so nearby sizes share them."""
        return max(VECTOR_BYTES, 1 << (self.chunk - 1).bit_length())

    def in_slots(self) -> list[tuple[int, int]]:
        """(user byte offset, kernel byte offset) of each input part."""
        return [(p * self.part, p * self.padded_part) for p in range(self.in_parts)]

    def out_slots(self) -> list[tuple[int, int]]:
        """(user byte offset, kernel byte offset) of each output part."""
        return [(p * self.part, p * self.padded_part) for p in range(self.out_parts)]


def message_layout(xplan: ExecutionPlan, rank: int, send_bytes: int, recv_bytes: int, itemsize: int) -> MessageLayout:
    """The layout of a call with ``send_bytes`` and ``recv_bytes`` of elements of ``itemsize`` bytes on ``rank``."""
    plan = xplan.plan
    gpu = plan.gpus[rank]
    align = math.lcm(plan.buffer_alignment, VECTOR_BYTES, itemsize)
    parts = _parts(plan.collective, plan.num_ranks)
    if parts is None:  # no part structure: the buffers must split into whole aligned chunks as they are
        parts = (gpu.input_chunks, gpu.output_chunks)
        if 0 in parts:  # a side without chunks takes no bytes (MSCCL++ sizes chunks from the other side)
            return _one_sided(xplan, rank, send_bytes if parts[0] else recv_bytes, max(parts), align)
    in_parts, out_parts = parts
    if gpu.input_chunks % in_parts or gpu.output_chunks % out_parts or \
            gpu.input_chunks // in_parts != gpu.output_chunks // out_parts:
        raise PlanError(f"plan {plan.name!r}: rank {rank} has {gpu.input_chunks} input and {gpu.output_chunks} "
                        f"output chunks, which do not split into {in_parts} input and {out_parts} output parts "
                        f"of equal chunk counts as {plan.collective} needs")
    per = gpu.input_chunks // in_parts
    if send_bytes % in_parts or recv_bytes % out_parts or send_bytes // in_parts != recv_bytes // out_parts:
        raise PlanError(f"plan {plan.name!r} ({plan.collective}, {plan.num_ranks} ranks): a send buffer of "
                        f"{send_bytes} bytes and a receive buffer of {recv_bytes} bytes do not make {in_parts} "
                        f"input and {out_parts} output parts of one size")
    part = send_bytes // in_parts
    if part % itemsize:
        raise PlanError(f"plan {plan.name!r}: parts of {part} bytes are not whole elements of {itemsize} bytes")
    chunk = max(align, -(-part // (per * align)) * align)
    if _parts(plan.collective, plan.num_ranks) is None and chunk * per != part:
        raise PlanError(f"plan {plan.name!r} ({plan.collective}): {send_bytes} bytes do not split into "
                        f"{gpu.input_chunks} chunks of a multiple of {align} bytes")
    lay = MessageLayout(chunk, part, in_parts, out_parts, per,
                        io_layout(plan.collective, plan.inplace, rank, gpu.input_chunks, gpu.output_chunks))
    message = part * (out_parts if plan.collective == "allgather" else in_parts)
    if not plan.min_message_size <= message <= plan.max_message_size:
        raise PlanError(f"plan {plan.name!r} covers messages of {plan.min_message_size} to "
                        f"{plan.max_message_size} bytes, got {message}")
    return lay


def _one_sided(xplan: ExecutionPlan, rank: int, nbytes: int, chunks: int, align: int) -> MessageLayout:
    """The layout of a plan without part structure whose input or output (or both) has no chunks: chunks
    are sized from the side that has them; a plan with neither moves scratch only, in ``align``-byte chunks."""
    plan, gpu = xplan.plan, xplan.plan.gpus[rank]
    if chunks and (nbytes % chunks or (nbytes // chunks) % align):
        raise PlanError(f"plan {plan.name!r} ({plan.collective}): {nbytes} bytes do not split into {chunks} "
                        f"chunks of a multiple of {align} bytes")
    chunk = nbytes // chunks if chunks and nbytes else align
    per = 1 if chunks else 0
    return MessageLayout(chunk, chunk * per, gpu.input_chunks, gpu.output_chunks, per,
                         io_layout(plan.collective, plan.inplace, rank, gpu.input_chunks, gpu.output_chunks))
