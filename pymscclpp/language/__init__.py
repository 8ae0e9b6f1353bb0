"""The DSL for collective algorithms, shaped like MSCCL++'s ``mscclpp.language`` (v0.8 API and plan format).

Format matched: MSCCL++ v0.8 (its ``CollectiveProgram`` DSL and the JSON its v0.8 executor loads).
A program written for MSCCL++ v0.8+ runs with only its import changed (``mscclpp.language`` ->
``pymscclpp.language``): the submodules ``channel``, ``rank``, ``general``, ``program``, ``collectives``,
``loop``, ``thread_block_group`` and ``utils`` keep MSCCL++'s names, arguments and semantics, and ``JSON()``
returns an execution plan in the JSON format MSCCL++ v0.8's executor reads (``gpus`` -> ``threadblocks`` ->
``ops``; ``channels``, ``remote_buffers``, ``semaphores``; ``min/max_message_size``). Switch (NVLS) channels
are not supported. ``plan`` loads and validates plans, ``interpreter`` runs them for all ranks with numpy,
``python -m pymscclpp.language.verify PLAN.json`` checks one, and ``programs`` holds ready-made algorithms.
"""

from .channel import MemoryChannel, PortChannel
from .collectives import AllGather, AllReduce, AllToAll, Collective, ReduceScatter, SendRecv, TestCollective
from .errors import DSLError
from .general import JSON
from .internal.types import BufferType, ChannelType, Chunk, ReduceOperationType, ReplicationPolicy, SyncType
from .loop import LoopIterationContext
from ..plan import Plan, PlanError, load_plan
from .program import CollectiveProgram
from .rank import Buffer, Rank, Semaphore
from .thread_block_group import ThreadBlockGroup
from .utils import AlgoSpec

__all__ = ["AlgoSpec", "AllGather", "AllReduce", "AllToAll", "Buffer", "BufferType", "ChannelType", "Chunk",
           "Collective", "CollectiveProgram", "DSLError", "JSON", "LoopIterationContext", "MemoryChannel", "Plan",
           "PlanError", "PortChannel", "Rank", "ReduceOperationType", "ReduceScatter", "ReplicationPolicy", "Semaphore",
           "SendRecv", "SyncType", "TestCollective", "ThreadBlockGroup", "load_plan"]
