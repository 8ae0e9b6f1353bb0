"""Executor: run an execution plan on a communicator with a kernel generated for the plan and this rank.

``execute`` is collective: every rank of the plan calls it with its own buffers. The first call for a plan,
a chunk-size bucket or a set of buffers sets up what it needs with the peers (semaphores, scratch, buffer
exchange), so, as with MSCCL++'s executor, ranks must pass new buffers in the same call. Later calls with
the same buffer objects are one dictionary lookup and one kernel launch (plus copies when buffers are staged);
the executor keeps the buffers of the calls it has set up referenced until ``close``.

Given the communicator's call check (``callcheck.area``, as ``PlanAlgorithm`` gives it), kernels are
generated ``checked``: each call's fingerprint travels as an argument, every thread block compares it with the
peers' before any op, and the copies into the user's buffers after the kernel run only if the calls agreed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .. import config
from ..channels import reduce as red
from ..errors import InvalidUsageError, ProxyError
from ..plan import PlanError
from ..runtime.backend import IS_SIM
from ..runtime.buffers import buffer_info, stream_handle
from ..runtime.device_errors import OP_CALLCHECK
from ..runtime.launch import Launch
from .cache import load_module
from .codegen import KernelSpec, launch_dims
from .layout import MessageLayout, message_layout
from .plan import ExecutionPlan
from .ports import host_layout, host_of
from .resources import Binding, Copies, PlanResources, ScratchSet, scratch_bytes

if TYPE_CHECKING:
    from ..callcheck.area import CallCheck

_FAST_ENTRIES = 64  # calls remembered by buffer object identity (their buffers stay referenced)
_SIM_SCRATCH_LIMIT = 1 << 30


@dataclass
class KernelStats:
    """How long one kernel took to get ready: writing/importing its source, and compiling (or loading
    numba's disk cache: ``disk_cache_hit``)."""

    plan: str
    rank: int
    size_class: int
    source_s: float
    compile_s: float
    disk_cache_hit: bool


class _NoThreadBlocks:
    """The launch of a rank the plan gives no thread blocks (its peers may still use its buffers): nothing."""

    def launch(self, stream: int = 0) -> None:
        """No kernel to issue."""


class PreparedCall:
    """One call's copies in, kernel launch and copies out, ready to issue on any stream; ``call_check``: the
    launch is checked (it takes the call's fingerprint) and the copies out wait on its verdict."""

    def __init__(self, launch: Launch | _NoThreadBlocks, binding: Binding, comm, check=None,
                 call_check: CallCheck | None = None):
        self.launch_, self.binding, self.comm, self.check = launch, binding, comm, check
        self.checked = call_check is not None
        self.pre, self.post = Copies(binding.pre), Copies(binding.post, call_check)

    def run(self, stream: int = 0, fingerprint: int = 0) -> None:
        """Issue the call on CUstream ``stream`` (asynchronous on GPUs; capturable in a CUDA graph), a checked
        one with the call's ``fingerprint`` (0: not compared)."""
        if self.pre.pairs:
            self.pre.run(stream)
        if self.checked:
            self.launch_.set_int("fingerprint", fingerprint)
        self.launch_.launch(stream)
        if self.post.pairs:
            self.post.run(stream)
        if IS_SIM:
            if self.check is not None:
                self.check()
            self.comm.check_device_errors()


def _ident(buf) -> tuple:
    """A cheap identity of a buffer: its address, size and dtype."""
    if hasattr(buf, "data_ptr") and type(buf).__module__.split(".")[0] == "torch":
        return buf.data_ptr(), buf.numel(), str(buf.dtype)
    if IS_SIM and hasattr(buf, "_ary"):
        return buf._ary.ctypes.data, buf._ary.nbytes, buf._ary.dtype.str
    cai = getattr(buf, "__cuda_array_interface__", None)
    if cai is None:
        return (id(buf),)
    return cai["data"][0], tuple(cai["shape"]), cai["typestr"]


def _dtype_name(info) -> str:
    return info.dtype if isinstance(info.dtype, str) else np.dtype(info.dtype).name


class Executor:
    """Runs execution plans on ``comm``; ``sim_threads`` threads play each plan thread block under the
    simulator (default ``PYMSCCLPP_SIM_THREADS`` or 4); ``max_scratch_bytes`` caps a plan's scratch;
    ``call_check``: the communicator's call check, which checked kernels use (None: none is checked)."""

    def __init__(self, comm, sim_threads: int | None = None, max_scratch_bytes: int | None = None,
                 call_check: CallCheck | None = None):
        self.comm = comm
        self.call_check = call_check
        self.sim_threads = sim_threads or config.get("PYMSCCLPP_SIM_THREADS")
        self.max_scratch_bytes = max_scratch_bytes
        self.stats: list[KernelStats] = []
        self._plans: dict[int, tuple] = {}  # id(plan object) -> (the object, kept alive; its ExecutionPlan)
        self._resources: dict[str, PlanResources] = {}
        self._calls: dict[tuple, PreparedCall] = {}  # (plan hash, buffers, op) -> call
        self._fast: dict[tuple, tuple] = {}  # (ids of plan, send, recv; op) -> (plan, send, recv, call)
        self.proxy = None  # the ProxyService of every plan's port channels, made by the first plan with one

    def execute(self, plan, sendbuf, recvbuf=None, op: str = "sum", stream=None, fingerprint: int = 0) -> None:
        """Run ``plan`` on ``sendbuf`` into ``recvbuf`` (``None``: in place) on the caller's ``stream``.

        ``op`` (sum, min, max, prod) is used by every reduction of the plan. ``fingerprint``: the call's
        (``CallCheck.fingerprint``), which a checked kernel compares with every peer's before any op (0: not
        compared). Raises ``PlanError`` when the plan cannot run here (ranks, hosts, semaphores, scratch, dtype),
        before anything is launched.
        """
        self.comm.raise_if_failed()
        key = (id(plan), id(sendbuf), id(recvbuf), op)
        hit = self._fast.get(key)
        if hit is not None and hit[0] is plan and hit[1] is sendbuf and hit[2] is recvbuf:
            call = hit[3]
        else:
            call = self.prepare(plan, sendbuf, recvbuf, op)
            if call is None:
                return
            if len(self._fast) >= _FAST_ENTRIES:
                del self._fast[next(iter(self._fast))]
            self._fast[key] = (plan, sendbuf, recvbuf, call)
        call.run(stream_handle(stream), fingerprint)

    def prepare(self, plan, sendbuf, recvbuf=None, op: str = "sum") -> PreparedCall | None:
        """Set up (collectively) everything a call needs and return it ready to run; None for empty buffers."""
        xplan = self._plan(plan)
        key = (xplan.key, _ident(sendbuf), _ident(recvbuf) if recvbuf is not None else None, op)
        if key in self._calls:
            return self._calls[key]
        recvbuf = sendbuf if recvbuf is None else recvbuf
        send, recv = buffer_info(sendbuf, self.comm.device), buffer_info(recvbuf, self.comm.device)
        dtype = _dtype_name(send)
        if dtype != _dtype_name(recv):
            raise InvalidUsageError(f"send buffer is {dtype} but receive buffer is {_dtype_name(recv)}")
        gpu = xplan.plan.gpus[self.comm.rank] if self.comm.rank < xplan.num_ranks else None
        if send.nbytes == 0 and recv.nbytes == 0 and (gpu is None or gpu.input_chunks or gpu.output_chunks):
            return None  # nothing to move (a plan without input and output chunks still runs: it moves scratch)
        if xplan.key not in self._resources:
            self._check_same_plan(xplan)
        self._check_comm(xplan)
        kind, code = self._reduction(xplan, dtype, op)
        itemsize = send.nbytes // max(1, int(np.prod(send.shape, dtype=np.int64)))
        layout = message_layout(xplan, self.comm.rank, send.nbytes, recv.nbytes, itemsize)
        self._check_scratch(xplan, layout)
        resources = self._resources.get(xplan.key)
        if resources is None:
            resources = self._resources[xplan.key] = PlanResources(self.comm, xplan, self._proxy_for(xplan))
        proxy = resources.proxy
        scratch = resources.scratch_sets.get(layout.bucket)
        if scratch is None:
            scratch = resources.scratch_sets[layout.bucket] = ScratchSet(self.comm, xplan, layout.bucket, proxy)
        checked = self._checkable(xplan)
        binding = Binding(self.comm, xplan, scratch, layout, sendbuf, send, recvbuf, recv, proxy, checked)
        spec = KernelSpec(xplan, self.comm.rank, kind, code, itemsize if kind is not None else 1, layout.size_class,
                          self.sim_threads if IS_SIM else 0, checked)
        call = self._calls[key] = PreparedCall(self._launch(spec, resources, scratch, binding, layout), binding,
                                               self.comm, self.check if proxy is not None else None,
                                               self.call_check if checked else None)
        return call

    def close(self) -> None:
        """Forget every prepared call, plan resource and buffer reference (the communicator stays open); stop
        the proxy (collective with the ranks its port channels reach)."""
        self._fast.clear()
        self._calls.clear()
        self._resources.clear()
        self._plans.clear()
        if self.proxy is not None:
            self.proxy.close()
            self.proxy = None

    # -- pieces of prepare ----------------------------------------------------------------------

    def _plan(self, plan) -> ExecutionPlan:
        known = self._plans.get(id(plan))
        if known is None:
            known = self._plans[id(plan)] = (plan, ExecutionPlan.from_plan(plan))
        return known[1]

    def _proxy_for(self, xplan: ExecutionPlan):
        """The executor's running ProxyService when some rank of the plan has port channels, else None
        (every rank gets one then, so the pair calls of setup line up)."""
        if not xplan.uses_ports:
            return None
        if self.proxy is None:
            from ..proxy import ProxyService
            comm = self.comm
            self.proxy = proxy = ProxyService(comm)
            proxy.start()
            if comm.liveness is not None:  # a dead peer ends the port waits too, and every linked proxy hears
                comm.liveness.on_death(lambda peer, reason: proxy.fail(
                    f"rank {comm.rank}: peer {peer} on {host_of(comm.host_ids, peer)} is gone ({reason})"))
        self.check()
        return self.proxy

    def check(self) -> None:
        """Raise ProxyError if the proxy of this executor's port channels failed (a link to a peer dropped, a
        peer died, a trigger was rejected), naming this rank's host and the job's layout. Collectives of a
        failed proxy cannot run again; make a new communicator."""
        if self.proxy is not None and self.proxy.failed:
            comm = self.comm
            try:
                self.proxy.check()
            except ProxyError as exc:
                raise ProxyError(f"{exc} [rank {comm.rank} is on {host_of(comm.host_ids, comm.rank)}; "
                                 f"{host_layout(comm.host_ids)}]") from None

    def _checkable(self, xplan: ExecutionPlan) -> bool:
        """Whether the plan's calls are checked: the executor has an enabled call check and every rank's kernel
        can run it (decided alike on every rank, which all know the plan; a rank without thread blocks runs
        the check kernel)."""
        call_check = self.call_check
        if call_check is None or not call_check.enabled:
            return False
        sim_threads = self.sim_threads if IS_SIM else 0
        return all(call_check.fits(*launch_dims(xplan, r, sim_threads)) for r, gpu in enumerate(xplan.plan.gpus)
                   if gpu.threadblocks)

    def _check_same_plan(self, xplan: ExecutionPlan) -> None:
        """Every rank sets up the same plan (one all-gather per plan): ranks that chose plans for different
        host layouts fail here, on every rank, before any pair setup could hang."""
        keys = self.comm.bootstrap.all_gather(xplan.key.encode(), what="plan keys")
        if len(set(keys)) > 1:
            odd = [r for r, k in enumerate(keys) if k != keys[self.comm.rank]]
            raise PlanError(f"plan {xplan.name!r}: ranks {odd} set up a different plan than rank {self.comm.rank} "
                            f"({host_layout(self.comm.host_ids)}); every rank must run the same plan")

    def _check_comm(self, xplan: ExecutionPlan) -> None:
        comm, name = self.comm, xplan.name
        if xplan.num_ranks != comm.size:
            raise PlanError(f"plan {name!r} is for {xplan.num_ranks} ranks, but the communicator has {comm.size}")
        if xplan.key in self._resources:
            return
        far = [p for p in xplan.peers(comm.rank) if p not in comm.peer_pools]
        if far:
            raise PlanError(f"plan {name!r}: rank {comm.rank} has memory channels to ranks {far} on another host; "
                            f"memory channels need peers on the same host ({host_layout(comm.host_ids)}; "
                            "pymscclpp.language.programs.hierarchical.plan_for makes plans for a layout)")
        need = sum(xplan.tokens(comm.rank, p) for p in xplan.peers(comm.rank))
        need += sum(xplan.tokens(comm.rank, p, "port") for p in xplan.peers(comm.rank, "port"))
        slots = comm.device_pool.slots
        if need > slots.slots - slots.next:
            raise PlanError(f"plan {name!r} needs {need} semaphore tokens on rank {comm.rank} for its channels, but "
                            f"only {slots.slots - slots.next} of {slots.slots} are left (PYMSCCLPP_MAX_SEMAPHORES)")

    @staticmethod
    def _reduction(xplan: ExecutionPlan, dtype: str, op: str) -> tuple[int | None, int]:
        if not xplan.reduces:
            return None, 0
        if dtype not in red.DTYPE_KINDS:
            raise PlanError(f"plan {xplan.name!r} reduces, and cannot reduce {dtype}: supported dtypes are "
                            f"{', '.join(red.DTYPE_KINDS)}")
        if op not in red.OPS:
            raise InvalidUsageError(f"unknown reduction op {op!r}: supported are {', '.join(red.OPS)}")
        if op not in red.PAIRWISE_OPS:
            raise InvalidUsageError(f"plan {xplan.name!r} reduces pairwise and cannot average (op {op!r}): "
                                    f"supported are {', '.join(sorted(red.PAIRWISE_OPS))}")
        return red.DTYPE_KINDS[dtype], red.OPS[op]

    def _scratch_limit(self) -> int:
        if self.max_scratch_bytes is not None:
            return self.max_scratch_bytes
        limit = config.get("PYMSCCLPP_MAX_SCRATCH_BYTES")
        if limit is not None:
            return limit
        if IS_SIM:
            return _SIM_SCRATCH_LIMIT
        from numba import cuda
        return int(cuda.current_context().get_memory_info().free)

    def _check_scratch(self, xplan: ExecutionPlan, layout: MessageLayout) -> None:
        need = max(scratch_bytes(xplan, r, layout.bucket) for r in range(xplan.num_ranks))
        limit = self._scratch_limit()
        if need > limit:
            raise PlanError(f"plan {xplan.name!r} needs {need} bytes of scratch per rank for {layout.chunk}-byte "
                            f"chunks, more than the {limit} bytes available")

    def _launch(self, spec: KernelSpec, resources: PlanResources, scratch: ScratchSet, binding: Binding,
                layout: MessageLayout) -> Launch | _NoThreadBlocks:
        if not spec.xplan.plan.gpus[spec.rank].threadblocks:  # checked: its peers wait for its fingerprint
            return self.call_check.check_launch(OP_CALLCHECK) if spec.checked else _NoThreadBlocks()
        module, source_s = load_module(spec)
        values = {"inp": binding.kin, "out": binding.kout, "scr": scratch.scratch, "st": resources.state,
                  "err": self.comm.error_area, "abort_flag": self.comm.abort_word,
                  "timeout_ns": np.uint64(self.comm.timeout_ns), "wait_context": self.comm.wait_context(),
                  "chunk": np.int64(layout.chunk), "fingerprint": np.int64(0)}
        if spec.checked:
            values["call_check"] = self.call_check.handle
        values.update({f"rb{j}": arr for j, arr in enumerate(binding.remote)})
        values.update({f"sem{p}": h for p, h in resources.handles.items()})
        if resources.ports is not None:
            values.update({f"pc{c}": h for c, h in enumerate(resources.ports.handles)})
            values["pid"] = binding.port_ids
        grid, block = spec.launch_dims
        launch = Launch(module.kernel, grid, block, {n: values[n] for n in spec.arg_names})
        if source_s or launch.compile_s:
            self.stats.append(KernelStats(spec.xplan.name, spec.rank, spec.size_class, source_s, launch.compile_s,
                                          launch.disk_cache_hit))
        return launch
