"""Point-to-point calls of the ``"mscclpp"`` backend: send and recv on the Communicator (isend and irecv are the
same calls: their Work is finished once the kernels are queued on the current stream), and batches issued as
one ``comm.group()``, so a batch's sends and receives between any ranks, in any order, cannot deadlock.

torch hands a batch to a process group one call at a time: its coalescing manager brackets them with
``_start_coalescing``/``_end_coalescing`` (``Batch``), but ``batch_isend_irecv`` skips it for process groups
written in Python (torch 2.13) or asks their C++ backend, which they have none of (earlier), so ``install`` wraps
``batch_isend_irecv``: an mscclpp group's batch is its isend/irecv calls inside one ``comm.group()``.
"""

from __future__ import annotations

import contextlib

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d

from pymscclpp.communicator import Communicator
from pymscclpp.errors import InvalidUsageError
from pymscclpp.torch.work import FinishedWork

_TORCH_BATCH = distributed_c10d.batch_isend_irecv  # torch's own, which the wrapper calls


def _one(tensors: list, what: str) -> torch.Tensor:
    if len(tensors) != 1:
        raise InvalidUsageError(f"mscclpp backend {what}: expected one tensor, got {len(tensors)}")
    return tensors[0]


def send(comm: Communicator, tensors: list, peer: int) -> FinishedWork:
    """ProcessGroup.send: the tensor to group rank ``peer`` (tags are not matched, as in NCCL: calls pair in order)."""
    comm.send(_one(tensors, f"send to rank {peer}"), peer)
    return FinishedWork(tensors)


def recv(comm: Communicator, tensors: list, peer: int) -> FinishedWork:
    """ProcessGroup.recv: into the tensor from group rank ``peer``."""
    comm.recv(_one(tensors, f"recv from rank {peer}"), peer)
    return FinishedWork(tensors)


class Batch:
    """One ``comm.group()`` held open between torch's ``_start_coalescing`` and ``_end_coalescing`` calls."""

    def __init__(self, comm: Communicator) -> None:
        self._comm = comm
        self._open: contextlib.ExitStack | None = None

    def start(self) -> None:
        """Open the group; one left open by a batch that raised before its end is dropped with its calls."""
        if self._open is not None:
            stale, self._open = self._open, None
            error = InvalidUsageError("an earlier batch of sends and receives raised before its end")
            stale.__exit__(InvalidUsageError, error, None)
        self._open = contextlib.ExitStack()
        self._open.enter_context(self._comm.group())

    def end(self) -> FinishedWork:
        """Issue the batch's sends and receives together."""
        if self._open is None:
            raise InvalidUsageError("mscclpp backend: _end_coalescing without _start_coalescing")
        scope, self._open = self._open, None
        scope.close()
        return FinishedWork([])


def batch_isend_irecv(p2p_op_list: list) -> list:
    """torch's ``batch_isend_irecv``; on an mscclpp group its calls are made inside one ``comm.group()``."""
    comm = _communicator_of(p2p_op_list)
    if comm is None:  # another backend's batch, or a malformed list (torch's own error)
        return _TORCH_BATCH(p2p_op_list)
    with comm.group():
        return [op.op(op.tensor, op.peer, op.group, op.tag) for op in p2p_op_list]


def _communicator_of(p2p_op_list) -> Communicator | None:
    """The Communicator of the mscclpp process group every op of the list is on, else None."""
    if not isinstance(p2p_op_list, list) or not p2p_op_list or \
            not all(isinstance(op, dist.P2POp) and op.group is p2p_op_list[0].group for op in p2p_op_list):
        return None
    group = p2p_op_list[0].group or dist.group.WORLD
    comm = getattr(group, "comm", None) if isinstance(group, dist.ProcessGroup) else None
    return comm if isinstance(comm, Communicator) else None


def install() -> None:
    """Make ``torch.distributed.batch_isend_irecv`` (both names torch has for it) the wrapper above."""
    dist.batch_isend_irecv = distributed_c10d.batch_isend_irecv = batch_isend_irecv
