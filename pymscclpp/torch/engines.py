"""The custom all-reduce classes of two inference engines, on pymscclpp: SGLang's ``PyMscclppCommunicator`` and
vLLM's ``CustomAllreduce``, with their names, arguments and semantics, so an engine swaps one import.

Both run on the caller's current stream (or the one given) and stage through pymscclpp's own scratch buffers,
so any tensor address works eagerly and inside CUDA graph capture once the size class has run once.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
import torch.distributed as dist

from pymscclpp.communicator import Communicator
from pymscclpp.errors import InvalidUsageError
from pymscclpp.runtime.backend import IS_SIM
from pymscclpp.runtime.bootstrap import UniqueId, get_unique_id
from pymscclpp.torch.backend import MscclppProcessGroup
from pymscclpp.torch.ops import UNREDUCED, reduce_op_name


def _device(device) -> torch.device:
    """``device`` (an index, a name or a torch.device) as a torch.device; CPU stands in for CUDA on the simulator."""
    if IS_SIM:
        return torch.device("cpu")
    device = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
    return device if device.index is not None else torch.device("cuda", torch.cuda.current_device())


def communicator_from_group(group: dist.ProcessGroup | None, device) -> tuple[Communicator, bool]:
    """A Communicator over ``group``'s ranks on ``device`` and whether the caller owns it: an mscclpp group's own,
    else a new one whose unique id the group's first rank broadcasts (the engines pass a CPU/gloo group)."""
    group = group if group is not None else dist.group.WORLD
    if isinstance(group, MscclppProcessGroup):
        return group.comm, False
    rank, size = dist.get_rank(group), dist.get_world_size(group)
    box = [get_unique_id().to_bytes() if rank == 0 else None]
    dist.broadcast_object_list(box, src=dist.get_global_rank(group, 0), group=group)
    dev = _device(device)
    comm = Communicator.from_unique_id(UniqueId.from_bytes(box[0]), rank, size,
                                       device=None if IS_SIM else dev.index)
    return comm, True


def _servable(comm: Communicator, device: torch.device, inp: torch.Tensor, op) -> bool:
    """pymscclpp reduces ``inp`` in one call: several ranks, a reducible dtype and op, contiguous, on our device."""
    return (comm.size > 1 and reduce_op_name(inp.dtype, op) is not None and inp.is_contiguous()
            and inp.device == device)


class PyMscclppCommunicator:
    """SGLang's ``PyMscclppCommunicator(group, device)``: disabled until ``change_state(enable=True)`` (SGLang enables
    it around CUDA graph capture), then ``all_reduce`` sums in place on pymscclpp."""

    def __init__(self, group: dist.ProcessGroup, device) -> None:
        self.group = group
        self.device = _device(device)
        self.comm, self._owned = communicator_from_group(group, device)
        self.rank, self.world_size = self.comm.rank, self.comm.size
        self.available = True
        self.disabled = True

    def should_mscclpp_allreduce(self, inp: torch.Tensor, op=dist.ReduceOp.SUM) -> bool:
        """True when enabled and pymscclpp serves this tensor and op."""
        return not self.disabled and _servable(self.comm, self.device, inp, op)

    def all_reduce(self, tensor: torch.Tensor, op=dist.ReduceOp.SUM, stream=None) -> torch.Tensor:
        """Reduce ``tensor`` in place over the group on ``stream`` (None: torch's current stream); returns it."""
        name = reduce_op_name(tensor.dtype, op)
        if name is None:
            raise InvalidUsageError(f"PyMscclppCommunicator.all_reduce: {UNREDUCED}, not {op} of {tensor.dtype}")
        self.comm.all_reduce(tensor, op=name, stream=stream)
        return tensor

    @contextmanager
    def change_state(self, enable: bool | None = None) -> Iterator[None]:
        """Enable (or disable) the communicator inside the block; None means enabled when available."""
        old, self.disabled = self.disabled, not (self.available if enable is None else enable)
        try:
            yield
        finally:
            self.disabled = old

    def destroy(self) -> None:
        """Close the Communicator when this object made it."""
        if self._owned and self.available:
            self.comm.close()
        self.available, self.disabled = False, True


class CustomAllreduce:
    """vLLM's ``CustomAllreduce(group, device, max_size)``: ``custom_all_reduce`` returns a new tensor with the sum
    over the group (None when ``should_custom_ar`` says no), eagerly or inside ``capture()``."""

    def __init__(self, group: dist.ProcessGroup, device, max_size: int = 8192 * 1024) -> None:
        self.group = group
        self.device = _device(device)
        self.max_size = max_size
        self.comm, self._owned = communicator_from_group(group, device)
        self.rank, self.world_size = self.comm.rank, self.comm.size
        self.disabled = self.world_size == 1
        self._IS_CAPTURING = False
        self._closed = False

    def should_custom_ar(self, inp: torch.Tensor) -> bool:
        """True when enabled, pymscclpp sums this tensor, and it is smaller than ``max_size`` bytes."""
        return (not self.disabled and inp.numel() * inp.element_size() < self.max_size
                and _servable(self.comm, self.device, inp, dist.ReduceOp.SUM))

    def all_reduce(self, inp: torch.Tensor, *, out: torch.Tensor | None = None, registered: bool = False):
        """Sum ``inp`` over the group into ``out`` (new when None); ``registered`` is vLLM's and changes nothing here:
        pymscclpp copies through its own registered scratch either way."""
        out = torch.empty_like(inp) if out is None else out
        self.comm.all_reduce(inp, out)
        return out

    def custom_all_reduce(self, input: torch.Tensor) -> torch.Tensor | None:  # noqa: A002 (vLLM's name)
        """The sum over the group as a new tensor, or None when this call should go to another all-reduce. Inside
        ``capture()`` the warm-up runs before capture compute real sums too (vLLM's return uninitialized memory)."""
        if not self.should_custom_ar(input):
            return None
        return self.all_reduce(input, registered=self._IS_CAPTURING)

    @contextmanager
    def capture(self) -> Iterator[None]:
        """Mark a CUDA graph capture: nothing to register after it, as pymscclpp captures any address."""
        self._IS_CAPTURING = True
        try:
            yield
        finally:
            self._IS_CAPTURING = False

    def close(self) -> None:
        """Close the Communicator when this object made it; later calls are declined (should_custom_ar is False)."""
        if self._owned and not self._closed:
            self.comm.close()
        self._closed = self.disabled = True
