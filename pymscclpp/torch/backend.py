"""The ``"mscclpp"`` torch.distributed backend: a Python ProcessGroup serving the collectives below with a pymscclpp
Communicator on the caller's current stream (so CUDA graphs capture them) and forwarding every other call to
a process group made lazily on the same ranks and store (NCCL on GPUs).

Each collective is defined under every name torch 2.4 .. 2.14 calls it by (``_allgather_base`` up to 2.12,
``all_gather_single`` after, the ``*_coalesced`` forms functional collectives use), and the group keeps its own
name, so functional collectives, ``torch.compile`` and DTensor find it in torch's group registry.
"""

from __future__ import annotations

from datetime import timedelta

import torch
import torch.distributed as dist

from pymscclpp import config
from pymscclpp.communicator import Communicator
from pymscclpp.errors import InvalidUsageError, PymscclppError
from pymscclpp.fallback import nccl as nccl_fallback
from pymscclpp.runtime.backend import IS_SIM
from pymscclpp.runtime.bootstrap import UniqueId, get_unique_id
from pymscclpp.torch.ops import UNREDUCED, reduce_op_name
from pymscclpp.torch.work import FinishedWork, finished

NAME = "mscclpp"
FALLBACK_ENV = "PYMSCCLPP_TORCH_FALLBACK"  # nccl (default on GPUs), gloo (CPU tensors), none (default on the sim)
FORWARDED = ("allgather_coalesced", "alltoall", "reduce", "send", "recv", "recv_anysource")
HOST_STAGED = ("send", "recv", "recv_anysource")  # forwarded calls a gloo fallback serves for CUDA tensors via host
SERVED = ("all_reduce", "all_gather_into_tensor", "all_gather", "reduce_scatter_tensor", "reduce_scatter",
          "broadcast", "all_to_all_single", "barrier", "scatter", "gather")


def communicator_from_store(store: dist.Store, rank: int, size: int, key: str = "pymscclpp/uid") -> Communicator:
    """A Communicator over ``size`` ranks sharing a torch.distributed ``store``: rank 0 publishes a unique id under
    ``key`` (one id per call on every rank, so re-initializing on the same store is safe); on the current GPU."""
    generation = (store.add(f"{key}/calls", 1) - 1) // size
    if rank == 0:
        store.set(f"{key}/{generation}", get_unique_id().to_bytes())
    uid = UniqueId.from_bytes(bytes(store.get(f"{key}/{generation}")))
    return Communicator.from_unique_id(uid, rank, size, device=None if IS_SIM else torch.cuda.current_device())


def _single(tensors: list, what: str) -> torch.Tensor:
    if len(tensors) != 1:
        raise InvalidUsageError(f"mscclpp backend {what}: expected one tensor per process, got {len(tensors)}")
    return tensors[0]


def _pairs(outputs: list, inputs: list, what: str) -> zip:
    if len(outputs) != len(inputs):
        raise InvalidUsageError(f"mscclpp backend {what}: {len(outputs)} outputs for {len(inputs)} inputs")
    return zip(outputs, inputs)


def _method(group: dist.ProcessGroup, *names: str):
    """The first of ``names`` this torch's ProcessGroup binds (its collectives were renamed in torch 2.13)."""
    return next(getattr(group, name) for name in names if hasattr(group, name))


def _even(splits: list, tensor: torch.Tensor, size: int) -> bool:
    """True when all_to_all split sizes (empty: even) cut ``tensor``'s rows into ``size`` equal slots."""
    return not splits or all(s * size == tensor.shape[0] for s in splits)


class MscclppProcessGroup(dist.ProcessGroup):
    """all_reduce, all_gather (tensor and list), reduce_scatter (tensor and list), broadcast, even
    all_to_all_single and barrier run on pymscclpp (reductions: sum/min/max/prod of float32/bfloat16/float16/
    int32/uint8); the rest goes to the fallback group."""

    def __init__(self, store: dist.Store, rank: int, size: int, timeout: timedelta):
        super().__init__(rank, size)
        self.comm = communicator_from_store(store, rank, size)
        self._store, self._timeout = store, timeout
        self._fallback: dist.ProcessGroup | None = None
        self._fallback_kind = ""
        self._group_name = self._group_desc = ""
        self._token: torch.Tensor | None = None  # barrier's one-element all-reduce, made on first use

    def getBackendName(self) -> str:  # noqa: N802 (torch's names, called from C++ through pybind)
        return NAME

    # torch keeps a group's name in its C++ backends and this group has none: it keeps its own, reached from C++
    # (newer torch forwards getGroupName to Python) and from Python (group_name and _set_group_name, for 2.4)
    def getGroupName(self) -> str:  # noqa: N802
        return self._group_name

    def setGroupName(self, name: str) -> None:  # noqa: N802
        self._group_name = name

    def getGroupDesc(self) -> str:  # noqa: N802
        return self._group_desc

    def setGroupDesc(self, desc: str) -> None:  # noqa: N802
        self._group_desc = desc

    _set_group_name, _set_group_desc = setGroupName, setGroupDesc
    group_name = property(getGroupName)
    group_desc = property(getGroupDesc)

    def allreduce(self, tensors: list, opts) -> dist.Work:
        """dist.all_reduce (in place)."""
        tensor = _single(tensors, "all_reduce")
        op = reduce_op_name(tensor.dtype, opts.reduceOp)
        if op is None:
            return self._fallback_group("all_reduce", UNREDUCED).allreduce(tensors, opts)
        self.comm.all_reduce(tensor, op=op)
        return finished(tensors, opts)

    def allreduce_coalesced(self, tensors: list, opts) -> dist.Work:
        """dist.all_reduce_coalesced: one all-reduce per tensor (the fallback takes them all if any needs it)."""
        ops = [reduce_op_name(t.dtype, opts.reduceOp) for t in tensors]
        if None in ops:
            return self._fallback_group("all_reduce_coalesced", UNREDUCED).allreduce_coalesced(tensors, opts)
        for tensor, op in zip(tensors, ops):
            self.comm.all_reduce(tensor, op=op)
        return finished(tensors, opts)

    def all_gather_single(self, output: torch.Tensor, input: torch.Tensor, opts=None) -> dist.Work:  # noqa: A002
        """dist.all_gather_into_tensor (``_allgather_base`` before torch 2.13)."""
        self.comm.all_gather(input, output)
        return finished([output], opts)

    _allgather_base = all_gather_single

    def all_gather_single_coalesced(self, outputs: list, inputs: list, opts=None) -> dist.Work:
        """Functional all_gather_tensor and coalesced all_gather_into_tensor: one all-gather per pair."""
        for output, input in _pairs(outputs, inputs, "all_gather_into_tensor"):  # noqa: A001
            self.comm.all_gather(input, output)
        return finished(outputs, opts)

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def allgather(self, output_lists: list, inputs: list, opts=None) -> dist.Work:
        """dist.all_gather (a list of ``size`` outputs): gathered into one buffer, then copied out."""
        input = _single(inputs, "all_gather")  # noqa: A001
        outputs = _single(output_lists, "all_gather")
        gathered = input.new_empty((len(outputs), *input.shape))
        self.comm.all_gather(input.contiguous(), gathered)
        for out, part in zip(outputs, gathered.unbind(0)):
            out.copy_(part)
        return finished(outputs, opts)

    def reduce_scatter_single(self, output: torch.Tensor, input: torch.Tensor, opts) -> dist.Work:  # noqa: A002
        """dist.reduce_scatter_tensor (``_reduce_scatter_base`` before torch 2.13)."""
        op = reduce_op_name(input.dtype, opts.reduceOp)
        if op is None:
            group = self._fallback_group("reduce_scatter_tensor", UNREDUCED)
            return _method(group, "reduce_scatter_single", "_reduce_scatter_base")(output, input, opts)
        self.comm.reduce_scatter(input, output, op=op)
        return finished([output], opts)

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter_single_coalesced(self, outputs: list, inputs: list, opts) -> dist.Work:
        """Functional reduce_scatter_tensor and coalesced reduce_scatter_tensor: one reduce-scatter per pair."""
        ops = [reduce_op_name(t.dtype, opts.reduceOp) for t in inputs]
        if None in ops:
            group = self._fallback_group("reduce_scatter_tensor_coalesced", UNREDUCED)
            return group.reduce_scatter_tensor_coalesced(outputs, inputs, opts)
        for (output, input), op in zip(_pairs(outputs, inputs, "reduce_scatter_tensor"), ops):  # noqa: A001
            self.comm.reduce_scatter(input, output, op=op)
        return finished(outputs, opts)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    def reduce_scatter(self, outputs: list, input_lists: list, opts) -> dist.Work:
        """dist.reduce_scatter (a list of ``size`` inputs): concatenated, then reduce-scattered into the output."""
        output, inputs = _single(outputs, "reduce_scatter"), _single(input_lists, "reduce_scatter")
        op = reduce_op_name(output.dtype, opts.reduceOp)
        if op is None:
            return self._fallback_group("reduce_scatter", UNREDUCED).reduce_scatter(outputs, input_lists, opts)
        staged = output if output.is_contiguous() else torch.empty_like(output, memory_format=torch.contiguous_format)
        self.comm.reduce_scatter(torch.cat([t.reshape(-1) for t in inputs]), staged.view(-1), op=op)
        if staged is not output:
            output.copy_(staged)
        return finished(outputs, opts)

    def broadcast(self, tensors: list, opts) -> dist.Work:
        """dist.broadcast (in place, from ``opts.rootRank``)."""
        self.comm.broadcast(_single(tensors, "broadcast"), root=opts.rootRank)
        return finished(tensors, opts)

    def scatter(self, outputs: list, input_lists: list, opts) -> dist.Work:
        """dist.scatter (DTensor's distribute_tensor): the root's list broadcast as one buffer, each rank keeps its
        slot; simple rather than fast, as scatter is for set-up."""
        output, root = _single(outputs, "scatter"), opts.rootRank
        staged = output.new_empty((self.size(), *output.shape))
        if self.rank() == root:
            torch.stack(_single(input_lists, "scatter"), out=staged)
        self.comm.broadcast(staged, root=root)
        output.copy_(staged[self.rank()])
        return finished(outputs, opts)

    def gather(self, output_lists: list, inputs: list, opts) -> dist.Work:
        """dist.gather: an all-gather into one buffer, copied out on the root."""
        input = _single(inputs, "gather")  # noqa: A001
        gathered = input.new_empty((self.size(), *input.shape))
        self.comm.all_gather(input.contiguous(), gathered)
        if self.rank() == opts.rootRank:
            for out, part in zip(_single(output_lists, "gather"), gathered.unbind(0)):
                out.copy_(part)
        return finished(output_lists[0] if output_lists else [], opts)

    def all_to_all_single(self, output: torch.Tensor, input: torch.Tensor, output_split_sizes: list,  # noqa: A002
                          input_split_sizes: list, opts=None) -> dist.Work:
        """dist.all_to_all_single (``alltoall_base`` before torch 2.13); uneven split sizes go to the fallback."""
        if not (_even(output_split_sizes, output, self.size()) and _even(input_split_sizes, input, self.size())):
            group = self._fallback_group("all_to_all_single", "uneven split sizes")
            return _method(group, "all_to_all_single", "alltoall_base")(output, input, output_split_sizes,
                                                                        input_split_sizes, opts)
        self.comm.all_to_all(input, output)
        return finished([output], opts)

    alltoall_base = all_to_all_single

    def barrier(self, opts=None) -> dist.Work:
        """dist.barrier: a one-element all-reduce on pymscclpp, waited for on the host, as NCCL's barrier is."""
        if self._token is None:
            self._token = torch.zeros(1, dtype=torch.int32, device="cpu" if IS_SIM else torch.cuda.current_device())
        self.comm.all_reduce(self._token)
        if not IS_SIM:
            torch.cuda.current_stream(self._token.device).synchronize()
        return FinishedWork([self._token])

    def _forward(self, name: str, *args, **kwargs) -> dist.Work:
        group = self._fallback_group(name, f"pymscclpp serves only {', '.join(SERVED)}")
        if name in HOST_STAGED and self._fallback_kind == "gloo" and any(t.is_cuda for t in args[0]):
            return _through_host(group, name, *args, **kwargs)
        return getattr(group, name)(*args, **kwargs)

    def _fallback_group(self, what: str, why: str) -> dist.ProcessGroup:
        """The group serving ``what`` (pymscclpp does not: ``why``), made on first use by every rank."""
        if self._fallback is None:
            kind = config.get(FALLBACK_ENV) or ("none" if IS_SIM else "nccl")
            if kind == "none" or (kind == "nccl" and not dist.is_nccl_available()):
                raise nccl_fallback.missing(f"torch.distributed {what} on the mscclpp backend", why)
            self._fallback = _fallback_group(kind, self._store, self.rank(), self.size(), self._timeout)
            self._fallback_kind = kind
        return self._fallback

    def shutdown(self) -> None:
        """Close the fallback group and the Communicator (dist.destroy_process_group calls this); a group that failed
        (a peer died, a wait ran out) is aborted instead, so that a new one can be made in this process."""
        try:
            self.comm.check_device_errors()
        except PymscclppError:
            self.abort()
            return
        if self._fallback is not None:
            self._fallback.shutdown()
            self._fallback = None
        self.comm.close()

    def abort(self) -> None:
        """Abort the Communicator (a call in flight raises, nothing waits for a peer) and the fallback group."""
        self.comm.abort()
        if self._fallback is not None:
            fallback, self._fallback = self._fallback, None
            getattr(fallback, "abort", fallback.shutdown)()


def _forwarder(name: str):
    def forward(self: MscclppProcessGroup, *args, **kwargs):
        return self._forward(name, *args, **kwargs)
    forward.__name__ = forward.__qualname__ = name
    forward.__doc__ = f"``{name}`` on the fallback process group."
    return forward


for _name in FORWARDED:
    setattr(MscclppProcessGroup, _name, _forwarder(_name))


def _through_host(group: dist.ProcessGroup, name: str, tensors: list, *args, **kwargs) -> dist.Work:
    """gloo's point-to-point calls read and write host memory only (a CUDA pointer ends the process): send a
    host copy, or receive into one and copy it back. The call has completed when this returns, and so has the
    Work it returns (torch waits on it again, which gloo's own Work would not survive on GPUs)."""
    if name == "recv_anysource":
        raise InvalidUsageError("torch.distributed recv from any source of a CUDA tensor: the gloo fallback "
                                "cannot stage it through the host (name the source, or use the NCCL fallback)")
    host = [t.cpu() if name == "send" else torch.empty_like(t, device="cpu") for t in tensors]
    getattr(group, name)(host, *args, **kwargs).wait()
    if name != "send":
        for t, h in zip(tensors, host):
            t.copy_(h)
    return FinishedWork(tensors)


def _fallback_group(kind: str, store: dist.Store, rank: int, size: int, timeout: timedelta) -> dist.ProcessGroup:
    """A ProcessGroup with one ``kind`` backend (nccl for CUDA tensors, gloo for CPU ones) on its own store prefix,
    new for each group made on this store (a re-initialized group must not read the last one's addresses)."""
    generation = (store.add(f"fallback-{kind}/calls", 1) - 1) // size
    sub = dist.PrefixStore(f"fallback-{kind}/{generation}/", store)
    types = dist.ProcessGroup.BackendType
    if kind == "nccl":
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = timeout
        backend, btype, devices = dist.ProcessGroupNCCL(sub, rank, size, options), types.NCCL, ["cuda"]
    else:  # gloo (config checked the name); it takes CUDA tensors for some calls: the routing can be tested on one GPU
        backend, btype = dist.ProcessGroupGloo(sub, rank, size, timeout=timeout), types.GLOO
        devices = ["cpu"] if IS_SIM else ["cpu", "cuda"]
    try:
        group = dist.ProcessGroup(sub, rank, size)
        group._set_default_backend(btype)
    except TypeError:  # torch before 2.6 names the default backend in options instead
        group = dist.ProcessGroup(sub, rank, size, dist.ProcessGroup.Options(backend=kind))
    for device in devices:
        group._register_backend(torch.device(device), btype, backend)
    return group


def _create(store: dist.Store, rank: int, size: int, timeout: timedelta) -> MscclppProcessGroup:
    return MscclppProcessGroup(store, rank, size, timeout)


def register() -> None:
    """Register the backend as ``"mscclpp"`` for CUDA tensors (and CPU tensors, which stand in for them on the sim)."""
    if NAME not in dist.Backend.backend_list:
        dist.Backend.register_backend(NAME, _create, devices=["cuda", "cpu"] if IS_SIM else ["cuda"])
