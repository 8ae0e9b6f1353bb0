"""Algorithm specifications: everything ``CollectiveProgram.from_spec`` needs, in one value."""

from __future__ import annotations

from dataclasses import dataclass

from .collectives import Collective
from .internal.types import ReplicationPolicy


@dataclass
class AlgoSpec:
    """Arguments of a ``CollectiveProgram``, gathered so an algorithm can be described and built later."""

    name: str
    collective: Collective
    world_size: int
    instances: int = 1
    protocol: str = "Simple"
    instr_fusion: bool = True
    auto_sync: bool = True
    replication_policy: ReplicationPolicy = ReplicationPolicy.interleaved
    reuse_resources: bool = False
    num_threads_per_block: int = 1024
    use_double_scratch_buffer: bool = False
    buffer_alignment: int = 16
    min_message_size: int = 0
    max_message_size: int = 2**64 - 1
