"""Collectives a program implements; each fixes the chunk counts of every rank's input and output buffers."""

from __future__ import annotations

from .internal.types import BufferType
from .rank import BaseBuffer


class Collective:
    """Base of all collectives: ``num_ranks`` ranks, ``chunk_factor`` chunks per rank-sized part, in place or not."""

    name = "custom"

    def __init__(self, num_ranks: int, chunk_factor: int, inplace: bool):
        if num_ranks < 1 or chunk_factor < 1:
            raise ValueError(f"num_ranks ({num_ranks}) and chunk_factor ({chunk_factor}) must be positive")
        self.num_ranks = num_ranks
        self.chunk_factor = chunk_factor
        self.inplace = inplace

    def sizes(self) -> tuple[int, int]:
        """(input chunks, output chunks) of each rank."""
        raise NotImplementedError

    def check(self, prog) -> None:
        """Raise ``ValueError`` unless ``prog`` (a ``CollectiveProgram``) was made for this collective."""
        if prog.collective is not self or prog.num_ranks != self.num_ranks:
            raise ValueError(f"the program implements {prog.collective.name} on {prog.num_ranks} ranks, not this "
                             f"{self.name} on {self.num_ranks}")

    def init_buffers(self) -> list[dict[BufferType, BaseBuffer]]:
        """Each rank's input and output buffers."""
        n_in, n_out = self.sizes()
        return [{BufferType.input: BaseBuffer(r, BufferType.input, 0, n_in),
                 BufferType.output: BaseBuffer(r, BufferType.output, 0, n_out)} for r in range(self.num_ranks)]


class TestCollective(Collective):
    """Free-form buffers of ``input_size`` and ``output_size`` chunks; the plan's collective is ``"test"``."""

    name = "test"
    __test__ = False  # not a pytest test class

    def __init__(self, num_ranks: int, input_size: int, output_size: int):
        super().__init__(num_ranks, 1, False)
        self.input_size = input_size
        self.output_size = output_size

    def sizes(self) -> tuple[int, int]:
        return self.input_size, self.output_size


class AllGather(Collective):
    """Every rank ends with all ranks' inputs, concatenated in rank order."""

    name = "allgather"

    def sizes(self) -> tuple[int, int]:
        return self.chunk_factor, self.num_ranks * self.chunk_factor


class AllReduce(Collective):
    """Every rank ends with the element-wise sum of all inputs."""

    name = "allreduce"

    def sizes(self) -> tuple[int, int]:
        return self.num_ranks * self.chunk_factor, self.num_ranks * self.chunk_factor


class ReduceScatter(Collective):
    """Rank r ends with part r of the element-wise sum of all inputs."""

    name = "reducescatter"

    def sizes(self) -> tuple[int, int]:
        return self.num_ranks * self.chunk_factor, self.chunk_factor


class AllToAll(Collective):
    """Part j of rank i's input ends as part i of rank j's output."""

    name = "alltoall"

    def sizes(self) -> tuple[int, int]:
        return self.num_ranks * self.chunk_factor, self.num_ranks * self.chunk_factor


class SendRecv(Collective):
    """Point to point: each rank sends its input to a peer of the program's choosing; input and output have
    ``chunk_factor`` chunks (no fixed result: the interpreter checks races and deadlocks only)."""

    name = "sendrecv"

    def sizes(self) -> tuple[int, int]:
        return self.chunk_factor, self.chunk_factor
