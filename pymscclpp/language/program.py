"""``CollectiveProgram``: the container a DSL program is written in, and its compilation to an execution plan."""

from __future__ import annotations

import copy
import json
from typing import Any

from .channel import *  # noqa: F401,F403  (MSCCL++ programs reach channel names through this module)
from .collectives import *  # noqa: F401,F403
from .collectives import Collective
from .errors import DSLError
from .internal.globals import set_program
from .internal.ir import IrOp, caller_location
from .internal.pairing import check_channel_pairing, check_pairing
from .internal.passes import run_passes
from .internal.replicate import replicate_list, replicate_ops
from .internal.emit import emit_gpu
from .internal.types import BufferType, ChannelType, ReplicationPolicy
from ..plan.layout import io_layout
from ..plan.protocols import PLAN_SPELLING, protocol_name
from .rank import Semaphore  # noqa: F401
from .utils import AlgoSpec


class _GpuState:
    """What the DSL has recorded for one rank so far."""

    def __init__(self, input_chunks: int, output_chunks: int):
        self.input_chunks = input_chunks
        self.output_chunks = output_chunks
        self.scratch_chunks = 0
        self.channels: dict[ChannelType, list[int]] = {ChannelType.memory: [], ChannelType.port: []}
        self.switch_channels: list[tuple[BufferType, list[int]]] = []  # (buffer type, group ranks)
        self.remote_order: list[tuple[int, str]] = []  # (rank, buffer code) of peer buffers, first use first
        self.semaphores: list[int] = []
        self.tbs: dict[int, list[IrOp]] = {}
        self.barriers: dict[tuple[int, ...], int] = {}


class CollectiveProgram:
    """A collective algorithm written once for all ranks; ``with`` it active, DSL calls add ops to it.

    Compiling (``JSON()`` or ``to_json()``) checks signal/wait pairing, fuses instructions (``instr_fusion``),
    inserts the barriers that data dependencies within a thread block need (``auto_sync``), replicates
    ``instances`` copies, and emits the MSCCL++ execution plan.
    """

    def __init__(self, name: str, collective: Collective, num_ranks: int, instances: int = 1, protocol: str = "Simple",
                 instr_fusion: bool = True, auto_sync: bool = True,
                 replication_policy: ReplicationPolicy = ReplicationPolicy.interleaved, reuse_resources: bool = False,
                 num_threads_per_block: int = 1024, use_double_scratch_buffer: bool = False, buffer_alignment: int = 16,
                 min_message_size: int = 0, max_message_size: int = 2**64 - 1):
        if instances < 1:
            raise ValueError(f"instances must be >= 1, got {instances}")
        if num_ranks != collective.num_ranks:
            raise ValueError(f"num_ranks {num_ranks} differs from the collective's {collective.num_ranks}")
        self.name = name
        self.collective = collective
        self.num_ranks = num_ranks
        self.instances = instances
        self.protocol = protocol_name(protocol)  # MSCCL++'s "Simple"/"LL" (its default) or "simple"/"packet"
        self.instr_fusion = instr_fusion
        self.auto_sync = auto_sync
        self.replication_policy = replication_policy
        self.reuse_resources = reuse_resources
        self.num_threads_per_block = num_threads_per_block
        self.use_double_scratch_buffer = use_double_scratch_buffer
        self.buffer_alignment = buffer_alignment
        self.min_message_size = min_message_size
        self.max_message_size = max_message_size
        self.buffers = collective.init_buffers()
        self.gpus = [_GpuState(b[BufferType.input].size, b[BufferType.output].size) for b in self.buffers]
        self.loop_context: Any = None

    @classmethod
    def from_spec(cls, spec: AlgoSpec) -> "CollectiveProgram":
        """A program configured from an ``AlgoSpec``."""
        return cls(spec.name, spec.collective, spec.world_size, instances=spec.instances, protocol=spec.protocol,
                   instr_fusion=spec.instr_fusion, auto_sync=spec.auto_sync, replication_policy=spec.replication_policy,
                   reuse_resources=spec.reuse_resources, num_threads_per_block=spec.num_threads_per_block,
                   use_double_scratch_buffer=spec.use_double_scratch_buffer, buffer_alignment=spec.buffer_alignment,
                   min_message_size=spec.min_message_size, max_message_size=spec.max_message_size)

    def __enter__(self) -> "CollectiveProgram":
        set_program(self)
        return self

    def __exit__(self, exc_type, exc_value, traceback) -> None:
        set_program(None)

    # -- recording, called by the DSL objects ------------------------------------------------------

    def add_channel(self, src_rank: int, dst_rank: int, channel_type: ChannelType) -> int:
        peers = self.gpus[src_rank].channels[channel_type]
        peers.append(dst_rank)
        return len(peers) - 1

    def add_switch_channel(self, ranks: list[int], buffer_type: BufferType) -> dict[int, int]:
        """A switch channel on every rank of ``ranks``; returns each rank's id for it."""
        ids = {}
        for rank in ranks:
            ids[rank] = len(self.gpus[rank].switch_channels)
            self.gpus[rank].switch_channels.append((buffer_type, list(ranks)))
        return ids

    def add_semaphore(self, rank: int, initial_value: int) -> int:
        self.gpus[rank].semaphores.append(initial_value)
        return len(self.gpus[rank].semaphores) - 1

    def allocate_scratch(self, rank: int, size: int) -> int:
        offset = self.gpus[rank].scratch_chunks
        self.gpus[rank].scratch_chunks += size
        return offset

    def barrier_id(self, rank: int, tb_list: list[int]) -> int:
        barriers = self.gpus[rank].barriers
        return barriers.setdefault(tuple(tb_list), len(barriers))

    def set_loop_context(self, loop_context: Any) -> None:
        if self.loop_context is not None and loop_context is not None:
            raise DSLError("nested LoopIterationContext blocks are not supported")
        self.loop_context = loop_context

    def add_operation(self, op: IrOp) -> None:
        """Append ``op`` to its thread block; inside a loop context, to that block's current pipeline op."""
        if op.tb < 0:
            raise DSLError(f"thread block ids must be >= 0, got {op.tb}")
        op.where = caller_location()
        gpu = self.gpus[op.rank]
        for ref in op.src + op.dst:
            if ref.remote and (ref.rank, ref.buffer.value) not in gpu.remote_order:
                gpu.remote_order.append((ref.rank, ref.buffer.value))
        ops = gpu.tbs.setdefault(op.tb, [])
        if self.loop_context is None:
            ops.append(op)
            return
        op.loop = self.loop_context
        if not (ops and ops[-1].name == "pipeline" and ops[-1].loop is self.loop_context):
            ops.append(IrOp(op.rank, op.tb, "pipeline", loop=self.loop_context, where=op.where))
        ops[-1].ops.append(op)

    # -- compilation --------------------------------------------------------------------------------

    def to_dict(self, strict_pairing: bool = False) -> dict:
        """Compile to the execution plan as a dict; the recorded program is left unchanged.

        Signals and waits must balance per pair of ranks and channel type (MSCCL++'s rule); ``strict_pairing``
        also requires each channel's signals to meet waits on its partner channel, which the executor needs."""
        n = self.instances
        channels = {t: [g.channels[t] for g in self.gpus] for t in (ChannelType.memory, ChannelType.port)}
        check_pairing([g.tbs for g in self.gpus], channels)
        if strict_pairing:
            check_channel_pairing([g.tbs for g in self.gpus], channels)
        layouts = [io_layout(self.collective.name, self.collective.inplace, r, g.input_chunks, g.output_chunks)
                   for r, g in enumerate(self.gpus)]
        gpus = []
        for rank, g in enumerate(self.gpus):
            tbs = {tb: run_passes(copy.deepcopy(ops), layouts, self.instr_fusion, self.auto_sync)
                   for tb, ops in g.tbs.items()}
            tbs = replicate_ops(tbs, n, self.replication_policy)
            counts = (g.input_chunks * n, g.output_chunks * n, g.scratch_chunks * n)
            channels = {t: replicate_list(peers, n) for t, peers in g.channels.items()}
            gpus.append(emit_gpu(rank, counts, tbs, channels, replicate_list(g.switch_channels, n),
                                 replicate_list(g.semaphores, n), g.remote_order))
        return {
            "name": self.name,
            "collective": self.collective.name,
            "protocol": PLAN_SPELLING[self.protocol],
            "inplace": self.collective.inplace,
            "reuse_resources": self.reuse_resources,
            "gpus": gpus,
            "num_threads_per_block": self.num_threads_per_block,
            "use_double_scratch_buffer": self.use_double_scratch_buffer,
            "buffer_alignment": self.buffer_alignment,
            "min_message_size": self.min_message_size,
            "max_message_size": self.max_message_size,
        }

    def to_json(self, indent: int | None = 2, **kwargs: Any) -> str:
        """The execution plan as JSON text."""
        return json.dumps(self.to_dict(), indent=indent, **kwargs)
