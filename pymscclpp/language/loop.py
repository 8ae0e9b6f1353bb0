"""Pipelined loops: ops written inside run repeatedly over ``unit``-byte slices of their chunks (MSCCL++ ``pipeline``)."""

from __future__ import annotations

from .internal.globals import get_program


class LoopIterationContext:
    """``with LoopIterationContext(unit, num_chunks):`` groups each thread block's ops into one pipeline op.

    At run time the executor repeats the body ceil(num_chunks * chunk_bytes / unit) times, each pass
    working on the next ``unit`` bytes of every buffer the body names.
    """

    def __init__(self, unit: int, num_chunks: int):
        if unit <= 0 or num_chunks <= 0:
            raise ValueError(f"unit ({unit}) and num_chunks ({num_chunks}) must be positive")
        self.unit = unit
        self.num_chunks = num_chunks

    def __enter__(self) -> "LoopIterationContext":
        get_program().set_loop_context(self)
        return self

    def __exit__(self, exc_type, exc_value, traceback) -> None:
        get_program().set_loop_context(None)
