"""The ``"mscclpp"`` torch.distributed backend: a Python ProcessGroup serving five collectives with a pymscclpp
Communicator on the caller's current stream (so CUDA graphs capture them) and forwarding every other call to
an NCCL process group made lazily on the same ranks and store.
"""

from __future__ import annotations

import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future

from pymscclpp.channels.reduce import DTYPE_KINDS
from pymscclpp.communicator import Communicator, serves_reduction
from pymscclpp.errors import InvalidUsageError
from pymscclpp.fallback import nccl as nccl_fallback
from pymscclpp.runtime.backend import IS_SIM
from pymscclpp.runtime.bootstrap import UniqueId, get_unique_id

NAME = "mscclpp"
FALLBACK_ENV = "PYMSCCLPP_TORCH_FALLBACK"  # nccl (default on GPUs), gloo (CPU tensors), none (default on the sim)
FORWARDED = ("allreduce_coalesced", "allgather", "allgather_coalesced", "allgather_into_tensor_coalesced",
             "all_gather_single_coalesced", "alltoall", "barrier", "gather", "scatter", "reduce", "reduce_scatter",
             "reduce_scatter_tensor_coalesced", "reduce_scatter_single_coalesced", "send", "recv", "recv_anysource")
SERVED = ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "broadcast", "all_to_all_single")
_R = dist.ReduceOp.RedOpType
_OPS = {_R.SUM: "sum", _R.MIN: "min", _R.MAX: "max", _R.PRODUCT: "prod"}  # ops our algorithms serve
_UNREDUCED = f"pymscclpp reduces only SUM, MIN, MAX, PRODUCT of {', '.join(DTYPE_KINDS)}"


def communicator_from_store(store: dist.Store, rank: int, size: int, key: str = "pymscclpp/uid") -> Communicator:
    """A Communicator over ``size`` ranks sharing a torch.distributed ``store``: rank 0 publishes a unique id under
    ``key`` (one id per call on every rank, so re-initializing on the same store is safe); on the current GPU."""
    generation = (store.add(f"{key}/calls", 1) - 1) // size
    if rank == 0:
        store.set(f"{key}/{generation}", get_unique_id().to_bytes())
    uid = UniqueId.from_bytes(bytes(store.get(f"{key}/{generation}")))
    return Communicator.from_unique_id(uid, rank, size, device=None if IS_SIM else torch.cuda.current_device())


def _done(tensors: list) -> dist.Work:
    """A finished Work: our kernels are already queued on the caller's stream, as NCCL's wait() would order them."""
    fut = torch.futures.Future()
    fut.set_result(tensors)
    return _create_work_from_future(fut)


def _single(tensors: list, what: str) -> torch.Tensor:
    if len(tensors) != 1:
        raise InvalidUsageError(f"mscclpp backend {what}: expected one tensor per process, got {len(tensors)}")
    return tensors[0]


def _even(splits: list, tensor: torch.Tensor, size: int) -> bool:
    """True when all_to_all split sizes (empty: even) cut ``tensor``'s rows into ``size`` equal slots."""
    return not splits or all(s * size == tensor.shape[0] for s in splits)


def _op_name(tensor: torch.Tensor, reduce_op) -> str | None:
    """The pymscclpp name of ``reduce_op`` when our algorithms reduce ``tensor``'s dtype with it, else None."""
    op = _OPS.get(reduce_op.op)
    return op if op is not None and serves_reduction(str(tensor.dtype).removeprefix("torch."), op) else None


class MscclppProcessGroup(dist.ProcessGroup):
    """all_reduce, all_gather_into_tensor, reduce_scatter_tensor, broadcast and even all_to_all_single of one tensor
    (sum/min/max/prod, float32/bfloat16/float16/int32/uint8) run on pymscclpp; the rest goes to the fallback group."""

    def __init__(self, store: dist.Store, rank: int, size: int, timeout: timedelta):
        super().__init__(rank, size)
        self.comm = communicator_from_store(store, rank, size)
        self._store, self._timeout = store, timeout
        self._fallback: dist.ProcessGroup | None = None

    def getBackendName(self) -> str:  # noqa: N802 (torch's name)
        return NAME

    def allreduce(self, tensors: list, opts) -> dist.Work:
        """dist.all_reduce (in place)."""
        tensor = _single(tensors, "all_reduce")
        op = _op_name(tensor, opts.reduceOp)
        if op is None:
            return self._fallback_group("all_reduce", _UNREDUCED).allreduce(tensors, opts)
        self.comm.all_reduce(tensor, op=op)
        return _done(tensors)

    def all_gather_single(self, output: torch.Tensor, input: torch.Tensor, opts) -> dist.Work:  # noqa: A002
        """dist.all_gather_into_tensor / all_gather_single."""
        self.comm.all_gather(input, output)
        return _done([output])

    def reduce_scatter_single(self, output: torch.Tensor, input: torch.Tensor, opts) -> dist.Work:  # noqa: A002
        """dist.reduce_scatter_tensor / reduce_scatter_single."""
        op = _op_name(input, opts.reduceOp)
        if op is None:
            return self._fallback_group("reduce_scatter_tensor", _UNREDUCED).reduce_scatter_single(output, input, opts)
        self.comm.reduce_scatter(input, output, op=op)
        return _done([output])

    def broadcast(self, tensors: list, opts) -> dist.Work:
        """dist.broadcast (in place, from ``opts.rootRank``)."""
        self.comm.broadcast(_single(tensors, "broadcast"), root=opts.rootRank)
        return _done(tensors)

    def all_to_all_single(self, output: torch.Tensor, input: torch.Tensor, output_split_sizes: list,  # noqa: A002
                          input_split_sizes: list, opts) -> dist.Work:
        """dist.all_to_all_single; uneven split sizes go to the fallback group."""
        if not (_even(output_split_sizes, output, self.size()) and _even(input_split_sizes, input, self.size())):
            return self._fallback_group("all_to_all_single", "uneven split sizes").all_to_all_single(
                output, input, output_split_sizes, input_split_sizes, opts)
        self.comm.all_to_all(input, output)
        return _done([output])

    def _forward(self, name: str, *args, **kwargs) -> dist.Work:
        group = self._fallback_group(name, f"pymscclpp serves only {', '.join(SERVED)}")
        return getattr(group, name)(*args, **kwargs)

    def _fallback_group(self, what: str, why: str) -> dist.ProcessGroup:
        """The group serving ``what`` (pymscclpp does not: ``why``), made on first use by every rank."""
        if self._fallback is None:
            kind = os.environ.get(FALLBACK_ENV, "none" if IS_SIM else "nccl").strip().lower()
            if kind == "none" or (kind == "nccl" and not dist.is_nccl_available()):
                raise nccl_fallback.missing(f"torch.distributed {what} on the mscclpp backend", why)
            self._fallback = _fallback_group(kind, self._store, self.rank(), self.size(), self._timeout)
        return self._fallback

    def shutdown(self) -> None:
        """Close the fallback group and the Communicator (dist.destroy_process_group calls this)."""
        if self._fallback is not None:
            self._fallback.shutdown()
            self._fallback = None
        self.comm.close()


def _forwarder(name: str):
    def forward(self: MscclppProcessGroup, *args, **kwargs):
        return self._forward(name, *args, **kwargs)
    forward.__name__ = forward.__qualname__ = name
    forward.__doc__ = f"``{name}`` on the fallback process group."
    return forward


for _name in FORWARDED:
    setattr(MscclppProcessGroup, _name, _forwarder(_name))


def _fallback_group(kind: str, store: dist.Store, rank: int, size: int, timeout: timedelta) -> dist.ProcessGroup:
    """A ProcessGroup with one ``kind`` backend (nccl for CUDA tensors, gloo for CPU ones) on its own store prefix."""
    sub = dist.PrefixStore(f"fallback-{kind}/", store)
    group = dist.ProcessGroup(sub, rank, size)
    if kind == "nccl":
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = timeout
        backend, btype, device = dist.ProcessGroupNCCL(sub, rank, size, options), group.BackendType.NCCL, "cuda"
    elif kind == "gloo":
        backend, btype, device = dist.ProcessGroupGloo(sub, rank, size, timeout=timeout), group.BackendType.GLOO, "cpu"
    else:
        raise InvalidUsageError(f"{FALLBACK_ENV}={kind!r}: expected nccl, gloo or none")
    group._set_default_backend(btype)
    group._register_backend(torch.device(device), btype, backend)
    return group


def _create(store: dist.Store, rank: int, size: int, timeout: timedelta) -> MscclppProcessGroup:
    return MscclppProcessGroup(store, rank, size, timeout)


def register() -> None:
    """Register the backend as ``"mscclpp"`` for CUDA tensors (and CPU tensors, which stand in for them on the sim)."""
    if NAME not in dist.Backend.backend_list:
        dist.Backend.register_backend(NAME, _create, devices=["cuda", "cpu"] if IS_SIM else ["cuda"])
