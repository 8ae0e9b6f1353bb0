"""Channels, MSCCL++ style: ``MemoryChannel`` (direct loads/stores) and ``PortChannel`` (proxy/DMA) between two
ranks, and ``SwitchChannel`` (NVLS multimem) over a group of ranks.

A point-to-point channel is created on its ``src_rank`` towards ``dst_rank``; the k-th channel from a to b pairs
with the k-th channel from b to a, and a ``signal`` on one end is consumed by a ``wait`` on the other end.
"""

from __future__ import annotations

from typing import Sequence

from .errors import DSLError
from .internal.globals import get_program
from .internal.ir import IrOp, Ref
from .internal.types import BufferType, ChannelType, Chunk, RankGroup, ReduceOperationType, SyncType
from .thread_block_group import ThreadBlockGroup, placements

__all__ = ["MemoryChannel", "PortChannel", "SwitchChannel", "ThreadBlockGroup", "SyncType", "ReduceOperationType",
           "BufferType", "ChannelType", "Chunk", "RankGroup"]


class _Channel:
    """Shared checks and op construction of both channel kinds."""

    channel_type: ChannelType

    def __init__(self, dst_rank: int, src_rank: int):
        prog = get_program()
        for what, rank in (("source", src_rank), ("destination", dst_rank)):
            if not 0 <= rank < prog.num_ranks:
                raise DSLError(f"{what} rank {rank} is out of bounds: the program has {prog.num_ranks} ranks")
        if dst_rank == src_rank:
            raise DSLError(f"a channel connects two different ranks, got {src_rank} -> {dst_rank}")
        self.dst_rank = dst_rank
        self.src_rank = src_rank
        self.channel_id = prog.add_channel(src_rank, dst_rank, self.channel_type)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(dst_rank={self.dst_rank}, src_rank={self.src_rank}) #{self.channel_id}"

    @classmethod
    def reset(cls) -> None:
        """MSCCL++ resets its global channel counters between programs; ids are per program here, so nothing to do."""

    def _sync(self, name: str, tb: int, data_sync: SyncType) -> None:
        get_program().add_operation(IrOp(self.src_rank, tb, name, channel_type=self.channel_type,
                                         channels=[self.channel_id], data_sync=data_sync))

    def _check(self, local: Sequence[Chunk], remote: Sequence[Chunk]) -> None:
        for chunk in local:
            if chunk.rank != self.src_rank:
                raise DSLError(f"chunk {chunk} must be on the channel's source rank {self.src_rank}")
        for chunk in remote:
            if chunk.rank != self.dst_rank:
                raise DSLError(f"chunk {chunk} must be on the channel's destination rank {self.dst_rank}")

    def _transfer(self, name: str, dst_chunk: Chunk, src_chunk: Chunk, tb: int | None, tb_group: ThreadBlockGroup | None,
                  outgoing: bool = True, src_scratch: bool = False, dst_scratch: bool = False) -> None:
        """A one-to-one op: ``outgoing`` writes the peer's ``dst_chunk``; otherwise it reads the peer's ``src_chunk``."""
        self._check([src_chunk] if outgoing else [dst_chunk], [dst_chunk] if outgoing else [src_chunk])
        if dst_chunk.size != src_chunk.size:
            raise DSLError(f"chunk sizes differ: dst {dst_chunk.size}, src {src_chunk.size}")
        if src_scratch and src_chunk.buffer != BufferType.scratch:
            raise DSLError(f"{name}: the source chunk holds packets and must be in a scratch buffer")
        if dst_scratch and dst_chunk.buffer != BufferType.scratch:
            raise DSLError(f"{name}: the destination chunk receives packets and must be in a scratch buffer")
        src = Ref(src_chunk.rank, src_chunk.buffer, src_chunk.index, src_chunk.size, remote=not outgoing)
        dst = Ref(dst_chunk.rank, dst_chunk.buffer, dst_chunk.index, dst_chunk.size, remote=outgoing)
        for t, tbg in placements(tb, tb_group):
            get_program().add_operation(IrOp(self.src_rank, t, name, [src], [dst], channel_type=self.channel_type,
                                             channels=[self.channel_id], tbg=tbg))


class MemoryChannel(_Channel):
    """A channel whose thread blocks read and write the peer's memory directly (NVLink / PCIe peer access)."""

    channel_type = ChannelType.memory

    def signal(self, tb: int, data_sync: SyncType = SyncType.both, relaxed: bool = False) -> None:
        """Increment the peer's semaphore; with ``relaxed`` no memory ordering is implied."""
        self._sync("rlxsignal" if relaxed else "signal", tb, data_sync)

    def wait(self, tb: int, data_sync: SyncType = SyncType.both, relaxed: bool = False) -> None:
        """Wait for the next signal from the peer."""
        self._sync("rlxwait" if relaxed else "wait", tb, data_sync)

    def put(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int | None = None, tb_group: ThreadBlockGroup | None = None) -> None:
        """Write local ``src_chunk`` into the peer's ``dst_chunk``."""
        self._transfer("put", dst_chunk, src_chunk, tb, tb_group)

    def get(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int | None = None, tb_group: ThreadBlockGroup | None = None) -> None:
        """Read the peer's ``src_chunk`` into local ``dst_chunk``."""
        self._transfer("get", dst_chunk, src_chunk, tb, tb_group, outgoing=False)

    def put_packets(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int | None = None,
                    tb_group: ThreadBlockGroup | None = None) -> None:
        """Write local ``src_chunk`` into the peer's scratch ``dst_chunk`` as LL packets."""
        self._transfer("ppkt", dst_chunk, src_chunk, tb, tb_group, dst_scratch=True)

    def read_put_packets(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int | None = None,
                         tb_group: ThreadBlockGroup | None = None) -> None:
        """Forward LL packets from local scratch ``src_chunk`` (waiting for them) to the peer's scratch ``dst_chunk``."""
        self._transfer("rppkt", dst_chunk, src_chunk, tb, tb_group, src_scratch=True, dst_scratch=True)

    def reduce(self, local_src_chunk: Chunk, remote_src_chunks: Sequence[Chunk], tb: int | None = None,
               tb_group: ThreadBlockGroup | None = None, local_dst_chunk: Chunk | None = None,
               reduce_op: ReduceOperationType = ReduceOperationType.sum) -> None:
        """``local_dst_chunk = local_src_chunk (op) remote chunks...`` reading the peer's memory directly."""
        local_dst_chunk = local_src_chunk if local_dst_chunk is None else local_dst_chunk
        self._check([local_src_chunk, local_dst_chunk], remote_src_chunks)
        if not remote_src_chunks:
            raise DSLError("reduce needs at least one remote chunk")
        for chunk in [local_dst_chunk, *remote_src_chunks]:
            if chunk.size != local_src_chunk.size:
                raise DSLError(f"reduce chunk sizes differ: {chunk.size} vs local source {local_src_chunk.size}")
        src = [Ref(local_src_chunk.rank, local_src_chunk.buffer, local_src_chunk.index, local_src_chunk.size)]
        src += [Ref(c.rank, c.buffer, c.index, c.size, remote=True) for c in remote_src_chunks]
        dst = [Ref(local_dst_chunk.rank, local_dst_chunk.buffer, local_dst_chunk.index, local_dst_chunk.size)]
        for t, tbg in placements(tb, tb_group):
            get_program().add_operation(IrOp(self.src_rank, t, "rre", list(src), list(dst), channel_type=self.channel_type,
                                             channels=[self.channel_id], reduce_op=reduce_op, tbg=tbg))


class PortChannel(_Channel):
    """A channel driven by a host proxy (DMA / RDMA): puts are asynchronous until signalled or flushed."""

    channel_type = ChannelType.port

    def signal(self, tb: int, data_sync: SyncType = SyncType.both) -> None:
        """Increment the peer's semaphore once every earlier put on this channel has landed."""
        self._sync("signal", tb, data_sync)

    def wait(self, tb: int, data_sync: SyncType = SyncType.both) -> None:
        """Wait for the next signal from the peer."""
        self._sync("wait", tb, data_sync)

    def flush(self, tb: int, data_sync: SyncType = SyncType.both) -> None:
        """Wait until earlier puts on this channel completed, so their sources may be overwritten."""
        self._sync("flush", tb, data_sync)

    def put(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int) -> None:
        """Start copying local ``src_chunk`` into the peer's ``dst_chunk``."""
        self._transfer("put", dst_chunk, src_chunk, tb, None)

    def put_with_signal(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int) -> None:
        """``put`` followed by ``signal`` in one proxy request."""
        self._transfer("pws", dst_chunk, src_chunk, tb, None)

    def put_with_signal_and_flush(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int) -> None:
        """``put``, ``signal`` and ``flush`` in one proxy request."""
        self._transfer("pwsf", dst_chunk, src_chunk, tb, None)

    def put_packets(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int) -> None:
        """Copy local ``src_chunk`` into the peer's scratch ``dst_chunk`` as LL packets."""
        self._transfer("ppkt", dst_chunk, src_chunk, tb, None, dst_scratch=True)

    def read_put_packets(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int | None = None,
                         tb_group: ThreadBlockGroup | None = None) -> None:
        """Forward LL packets from local scratch ``src_chunk`` to the peer's scratch ``dst_chunk``."""
        self._transfer("rppkt", dst_chunk, src_chunk, tb, tb_group, src_scratch=True, dst_scratch=True)


class SwitchChannel:
    """An NVLS channel: buffer ``buffer_type`` of every rank in ``rank_list`` behind one multicast address.

    ``reduce`` is a multimem load-reduce (the element-wise reduction of a range over all group ranks, into a
    local chunk); ``broadcast`` a multimem store (a local chunk into that range on all group ranks). The
    interpreter runs them; the executor refuses plans that use them, since no multicast object is created here.
    """

    channel_type = ChannelType.switch

    def __init__(self, rank_list: Sequence[int], buffer_type: BufferType):
        prog = get_program()
        ranks = list(rank_list)
        if not ranks or len(set(ranks)) != len(ranks):
            raise DSLError(f"a switch channel needs distinct ranks, got {ranks}")
        for rank in ranks:
            if not 0 <= rank < prog.num_ranks:
                raise DSLError(f"rank {rank} is out of bounds: the program has {prog.num_ranks} ranks")
        self.buffer_type = buffer_type
        self.rank_group = RankGroup(len(ranks), ranks)
        self.channel_ids = prog.add_switch_channel(ranks, buffer_type)

    @classmethod
    def reset(cls) -> None:
        """MSCCL++ resets its global channel counters between programs; ids are per program here, so nothing to do."""

    def __repr__(self) -> str:
        return f"SwitchChannel(rank_list={self.rank_group.ranks}, buffer_type={self.buffer_type})"

    def at_rank(self, rank: int) -> "SwitchChannel.SwitchChannelRankView":
        """This channel as seen from ``rank``: its ops without the ``rank`` argument."""
        self._member(rank)
        return SwitchChannel.SwitchChannelRankView(self, rank)

    def _member(self, rank: int) -> None:
        if rank not in self.rank_group.ranks:
            raise DSLError(f"rank {rank} is not in this switch channel's group {self.rank_group.ranks}")

    def _group_ref(self, rank: int, buffer_offset: int, size: int) -> Ref:
        prog = get_program()
        for r in self.rank_group.ranks:
            have = prog.gpus[r].scratch_chunks if self.buffer_type == BufferType.scratch \
                else prog.buffers[r][self.buffer_type].size
            if buffer_offset < 0 or buffer_offset + size > have:
                raise DSLError(f"chunks [{buffer_offset}, {buffer_offset + size}) exceed the {have} chunks of rank "
                               f"{r}'s {self.buffer_type.name} buffer in the switch channel's group")
        return Ref(rank, self.buffer_type, buffer_offset, size, group=tuple(self.rank_group.ranks))

    def _local(self, rank: int, chunk: Chunk, size: int, what: str) -> Ref:
        self._member(rank)
        if chunk.rank != rank:
            raise DSLError(f"the {what} chunk {chunk} must be on rank {rank}, which runs the op")
        if chunk.size != size:
            raise DSLError(f"the {what} chunk has {chunk.size} chunks, the op moves {size}")
        return Ref(chunk.rank, chunk.buffer, chunk.index, chunk.size)

    def _add(self, rank: int, tb: int, name: str, src: Ref, dst: Ref, reduce_op: ReduceOperationType | None = None) -> None:
        get_program().add_operation(IrOp(rank, tb, name, [src], [dst], channel_type=ChannelType.switch,
                                         channels=[self.channel_ids[rank]], reduce_op=reduce_op))

    def reduce(self, rank: int, buffer_offset: int, size: int, dst_chunk: Chunk, tb: int,
               reduce_op: ReduceOperationType = ReduceOperationType.sum) -> None:
        """On ``rank``: ``dst_chunk`` = the reduction of chunks [buffer_offset, +size) over all group ranks."""
        dst = self._local(rank, dst_chunk, size, "destination")
        self._add(rank, tb, "glre", self._group_ref(rank, buffer_offset, size), dst, reduce_op)

    def broadcast(self, rank: int, src_chunk: Chunk, buffer_offset: int, size: int, tb: int) -> None:
        """On ``rank``: write ``src_chunk`` into chunks [buffer_offset, +size) of every group rank."""
        src = self._local(rank, src_chunk, size, "source")
        self._add(rank, tb, "gstore", src, self._group_ref(rank, buffer_offset, size))

    def broadcast_packets(self, rank: int, src_chunk: Chunk, buffer_offset: int, size: int, tb: int) -> None:
        """On ``rank``: forward the LL packets of scratch ``src_chunk`` into every group rank's scratch range."""
        if src_chunk.buffer != BufferType.scratch or self.buffer_type != BufferType.scratch:
            raise DSLError("broadcast_packets moves packets, which live in scratch: the source chunk and the switch "
                           "channel's buffer must both be scratch")
        src = self._local(rank, src_chunk, size, "source")
        self._add(rank, tb, "gstorepkt", src, self._group_ref(rank, buffer_offset, size))

    class SwitchChannelRankView:
        """A switch channel seen from one rank (``SwitchChannel.at_rank``)."""

        def __init__(self, channel: "SwitchChannel", rank: int):
            self._channel = channel
            self._rank = rank

        def reduce(self, buffer_offset: int, size: int, dst_chunk: Chunk, tb: int,
                   reduce_op: ReduceOperationType = ReduceOperationType.sum) -> None:
            """``SwitchChannel.reduce`` on this rank."""
            self._channel.reduce(self._rank, buffer_offset, size, dst_chunk, tb, reduce_op)

        def broadcast(self, src_chunk: Chunk, buffer_offset: int, size: int, tb: int) -> None:
            """``SwitchChannel.broadcast`` on this rank."""
            self._channel.broadcast(self._rank, src_chunk, buffer_offset, size, tb)

        def broadcast_packets(self, src_chunk: Chunk, buffer_offset: int, size: int, tb: int) -> None:
            """``SwitchChannel.broadcast_packets`` on this rank."""
            self._channel.broadcast_packets(self._rank, src_chunk, buffer_offset, size, tb)
