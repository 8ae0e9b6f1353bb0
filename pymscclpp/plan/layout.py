"""Where a rank's input and output buffers sit in one address space, in chunks.

Out of place the two are disjoint. In place they alias as MSCCL++ programs assume: allgather's input is
the rank's own slot of the output, reducescatter's output is the rank's own slot of the input, and
allreduce/alltoall (and custom collectives) use one buffer for both.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class IoLayout:
    """Offsets (in chunks) of the input and output buffers inside a rank's io space of ``size`` chunks."""

    input_offset: int
    output_offset: int
    size: int

    def offset(self, buffer_code: str) -> int:
        """Offset of buffer ``"i"`` or ``"o"``."""
        return self.input_offset if buffer_code == "i" else self.output_offset


def io_layout(collective: str, inplace: bool, rank: int, input_chunks: int, output_chunks: int) -> IoLayout:
    """The layout of rank ``rank``'s input and output for a plan of collective ``collective``."""
    if not inplace:
        return IoLayout(0, input_chunks, input_chunks + output_chunks)
    if collective == "allgather":
        return IoLayout(rank * input_chunks, 0, max(output_chunks, (rank + 1) * input_chunks))
    if collective == "reducescatter":
        return IoLayout(0, rank * output_chunks, max(input_chunks, (rank + 1) * output_chunks))
    return IoLayout(0, 0, max(input_chunks, output_chunks))
