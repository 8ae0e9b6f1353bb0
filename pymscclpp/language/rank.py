"""Per-rank DSL objects: ``Rank`` (local ops), buffers and chunk slicing, scratch ``Buffer`` and ``Semaphore``."""

from __future__ import annotations

from typing import Sequence

from .errors import DSLError
from .internal.globals import get_program
from .internal.ir import IrOp, Ref
from .internal.types import BufferType, Chunk, ReduceOperationType, SyncType
from .thread_block_group import ThreadBlockGroup, placements


def _ref(chunk: Chunk, remote: bool = False) -> Ref:
    return Ref(chunk.rank, chunk.buffer, chunk.index, chunk.size, remote)


def _check_rank(rank: int) -> None:
    num_ranks = get_program().num_ranks
    if not 0 <= rank < num_ranks:
        raise DSLError(f"rank {rank} is out of bounds: the program has {num_ranks} ranks")


class Rank:
    """One GPU of the program: its buffers and the ops that touch only its own memory."""

    def __init__(self, rank: int):
        _check_rank(rank)
        self.rank = rank

    def get_input_buffer(self) -> "BaseBuffer":
        return get_program().buffers[self.rank][BufferType.input]

    def get_output_buffer(self) -> "BaseBuffer":
        return get_program().buffers[self.rank][BufferType.output]

    def _local(self, *chunks: Chunk) -> None:
        for chunk in chunks:
            if chunk.rank != self.rank:
                raise DSLError(f"chunk {chunk} is on rank {chunk.rank}, not on rank {self.rank}")

    def _copy(self, name: str, dst_chunk: Chunk, src_chunk: Chunk, tb: int | None, tb_group: ThreadBlockGroup | None) -> None:
        self._local(dst_chunk, src_chunk)
        if dst_chunk.size != src_chunk.size:
            raise DSLError(f"chunk sizes differ: dst {dst_chunk.size}, src {src_chunk.size}")
        if name == "upkt" and src_chunk.buffer != BufferType.scratch:
            raise DSLError("unpack_packets reads packets, which live in a scratch buffer")
        if name == "cpkt" and dst_chunk.buffer != BufferType.scratch:
            raise DSLError("copy_packets writes packets, which live in a scratch buffer")
        for t, tbg in placements(tb, tb_group):
            get_program().add_operation(IrOp(self.rank, t, name, [_ref(src_chunk)], [_ref(dst_chunk)], tbg=tbg))

    def copy(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int | None = None, tb_group: ThreadBlockGroup | None = None) -> None:
        """Copy ``src_chunk`` to ``dst_chunk`` on this rank."""
        self._copy("copy", dst_chunk, src_chunk, tb, tb_group)

    def unpack_packets(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int | None = None,
                       tb_group: ThreadBlockGroup | None = None) -> None:
        """Wait for LL packets in scratch ``src_chunk`` and copy their data to ``dst_chunk``."""
        self._copy("upkt", dst_chunk, src_chunk, tb, tb_group)

    def copy_packets(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int | None = None,
                     tb_group: ThreadBlockGroup | None = None) -> None:
        """Copy ``src_chunk`` into scratch ``dst_chunk`` as LL packets (data + flag)."""
        self._copy("cpkt", dst_chunk, src_chunk, tb, tb_group)

    def reduce(self, src_chunk: Chunk, other_chunks: Sequence[Chunk], tb: int | None = None,
               tb_group: ThreadBlockGroup | None = None, dst_chunk: Chunk | None = None,
               reduce_op: ReduceOperationType = ReduceOperationType.sum, packet: bool = False) -> None:
        """``dst_chunk = src_chunk (op) other_chunks...``; with ``packet``, the others are LL packets in scratch."""
        dst_chunk = src_chunk if dst_chunk is None else dst_chunk
        if not other_chunks:
            raise DSLError("reduce needs at least one other chunk")
        self._local(src_chunk, dst_chunk, *other_chunks)
        for chunk in [dst_chunk, *other_chunks]:
            if chunk.size != src_chunk.size:
                raise DSLError(f"reduce chunk sizes differ: {chunk.size} vs src {src_chunk.size}")
            if packet and chunk is not dst_chunk and chunk.buffer != BufferType.scratch:
                raise DSLError("a packet reduce reads its other chunks as packets, which live in a scratch buffer")
        name = "repkt" if packet else "re"
        for t, tbg in placements(tb, tb_group):
            get_program().add_operation(IrOp(self.rank, t, name, [_ref(src_chunk)] + [_ref(c) for c in other_chunks],
                                             [_ref(dst_chunk)], reduce_op=reduce_op, tbg=tbg))

    def barrier(self, tb_list: Sequence[int]) -> None:
        """Synchronize thread blocks ``tb_list`` of this rank (one thread block: a ``__syncthreads``)."""
        tb_list = list(tb_list)
        if not tb_list:
            raise DSLError("a barrier needs at least one thread block")
        prog = get_program()
        if len(tb_list) == 1:
            prog.add_operation(IrOp(self.rank, tb_list[0], "nop"))
            return
        barrier_id = prog.barrier_id(self.rank, tb_list)
        for t in tb_list:
            prog.add_operation(IrOp(self.rank, t, "barrier", barrier=(barrier_id, len(tb_list))))


class BaseBuffer:
    """A rank's buffer seen as ``size`` chunks from ``offset``; slicing ``buf[a:b]`` gives a ``Chunk``."""

    def __init__(self, rank: int, buffer_type: BufferType, offset: int, size: int):
        self.rank = rank
        self.buffer_type = buffer_type
        self.offset = offset
        self.size = offset + size

    def __getitem__(self, key: slice) -> Chunk:
        if not isinstance(key, slice):
            raise TypeError(f"buffer indices must be slices, not {type(key).__name__}")
        if key.step not in (None, 1):
            raise ValueError(f"buffer slicing does not support step {key.step}")
        length = self.size - self.offset
        start = 0 if key.start is None else key.start
        stop = length if key.stop is None else key.stop
        if start < 0 or stop < 0:
            raise ValueError(f"buffer slicing does not support negative indices ({start}:{stop})")
        if start >= stop:
            raise ValueError(f"empty or reversed buffer slice {start}:{stop}")
        if self.offset + stop > self.size:
            raise DSLError(f"slice {start}:{stop} is out of bounds for {self.buffer_type.name} buffer of rank "
                           f"{self.rank} with {length} chunks")
        return Chunk(self.rank, self.buffer_type, self.offset + start, stop - start)


class Buffer(BaseBuffer):
    """``size`` chunks of scratch memory on ``rank``, allocated after earlier scratch buffers."""

    def __init__(self, rank: int, size: int):
        _check_rank(rank)
        if size <= 0:
            raise DSLError(f"scratch buffer size must be positive, got {size}")
        super().__init__(rank, BufferType.scratch, get_program().allocate_scratch(rank, size), size)


class Semaphore:
    """A counting semaphore shared by the thread blocks of one rank."""

    def __init__(self, rank: int, initial_value: int):
        _check_rank(rank)
        self.rank = rank
        self.initial_value = initial_value
        self.id = get_program().add_semaphore(rank, initial_value)

    @classmethod
    def reset(cls) -> None:
        """MSCCL++ resets its global semaphore counters between programs; ids are per program here, so nothing to do."""

    def acquire(self, tb: int, data_sync: SyncType = SyncType.both) -> None:
        """Block thread block ``tb`` until the semaphore is positive, then decrement it."""
        get_program().add_operation(IrOp(self.rank, tb, "sem_acquire", semaphores=[self.id], data_sync=data_sync))

    def release(self, tb: int, data_sync: SyncType = SyncType.both) -> None:
        """Increment the semaphore from thread block ``tb``."""
        get_program().add_operation(IrOp(self.rank, tb, "sem_release", semaphores=[self.id], data_sync=data_sync))
