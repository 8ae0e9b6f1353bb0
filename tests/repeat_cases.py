"""Rank functions for the memo tests: an algorithm that records each call it is given, so a test sees which calls
were repeats (the Communicator's kept call) and which were checked afresh."""

from __future__ import annotations

from pymscclpp.algos.algorithm import Algorithm, Call


class Recording(Algorithm):
    """An all-reduce that moves nothing and records (kept, stream, dtype, message bytes) of every call."""

    collective = "all_reduce"
    launch_reads_buffers = False

    def __init__(self, name: str):
        self.name, self.seen = name, []

    def setup(self, comm) -> None:
        pass

    def launch(self, call: Call) -> None:
        self.seen.append((call.kept, call.stream, call.dtype, call.message_bytes))

    def traffic(self, size: int, nranks: int, rank: int, root: int = 0) -> tuple[int, int]:
        return 0, 0


def memo_invalidations(comm, state) -> dict:
    """Calls on torch CPU tensors (the simulator's stand-ins for CUDA ones) served by recording algorithms: what
    each call reached the algorithm as."""
    import torch
    first = comm.register_algorithm(Recording("first"), prefer=True)
    base = torch.zeros(64, dtype=torch.float32)
    x = base[:32]
    for stream in (7, 7, 9):  # a repeat, then a repeat on another stream
        comm.all_reduce(x, stream=stream)
    comm.all_reduce(x.view(torch.int32), stream=9)  # the same address, another dtype
    del x
    comm.all_reduce(base[:32], stream=9)  # a new tensor where the freed one was: the same call
    comm.all_reduce(base[:16], stream=9)  # the same address, fewer elements
    second = comm.register_algorithm(Recording("second"), prefer=True)  # registered later: checked afresh
    comm.all_reduce(base[:16], stream=9)
    comm.all_reduce(base[:16], stream=9)
    return {"first": first.seen, "second": second.seen}
