"""What a plan needs on one rank, set up once and cached: semaphores, state, scratch, peers' buffers.

Three levels, each built collectively (every rank of the plan builds the same one in the same call):
``PlanResources`` per plan (semaphores with each peer, the state array), ``ScratchSet`` per plan and chunk
bucket (scratch, staging buffers, peers' scratch), ``Binding`` per plan, chunk bucket and user buffers (the
kernel's input/output views, the peers' input/output, copies in and out).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numba import cuda

from ..errors import BackendError, InvalidUsageError
from ..plan import PlanError
from ..runtime.backend import IS_SIM
from ..runtime.buffers import as_bytes
from ..runtime.memory import alloc
from ..runtime.semaphore import Device2DeviceSemaphore
from .codegen import state_layout
from .layout import MessageLayout
from .plan import ExecutionPlan
from .ports import PlanPorts, exchange, memory_ids

if TYPE_CHECKING:
    from ..callcheck.area import CallCheck


class PlanResources:
    """Per plan: one multi-token semaphore with each peer, the port channels through ``proxy`` (the
    executor's ProxyService, None when the plan has none) and the persistent state array."""

    def __init__(self, comm, xplan: ExecutionPlan, proxy=None):
        rank = comm.rank
        self.comm, self.xplan, self.proxy = comm, xplan, proxy
        self.ports = PlanPorts(proxy, xplan, rank) if proxy is not None else None
        self.layout = state_layout(xplan, rank)
        self.semaphores = {p: Device2DeviceSemaphore(comm, p, xplan.tokens(rank, p))
                           for p in xplan.peers(rank) if xplan.tokens(rank, p)}
        self.handles = {p: s.device_handle() for p, s in self.semaphores.items()}
        host = np.zeros(self.layout.words, np.uint64)
        sems = xplan.plan.gpus[rank].semaphores
        host[self.layout.semaphore_base:self.layout.semaphore_base + len(sems)] = sems
        self.state = cuda.to_device(host)
        self.scratch_sets: dict[int, ScratchSet] = {}


def scratch_bytes(xplan: ExecutionPlan, rank: int, chunk: int) -> int:
    """Bytes of scratch ``rank`` needs with ``chunk``-byte chunks (packets are twice as wide; double halves),
    with the staging slots of port put-packets ops after it."""
    plan = xplan.plan
    chunks = plan.gpus[rank].scratch_chunks * (2 if plan.use_double_scratch_buffer else 1) + xplan.staging_chunks(rank)
    return chunks * chunk * (2 if xplan.uses_packets else 1)


class ScratchSet:
    """Per plan and chunk bucket: this rank's scratch, the peers' scratch it reaches, staging buffers."""

    def __init__(self, comm, xplan: ExecutionPlan, bucket: int, proxy=None):
        rank = comm.rank
        self.xplan, self.rank, self.bucket = xplan, rank, bucket
        self.scratch = alloc(max(16, scratch_bytes(xplan, rank, bucket)))
        self.remote = {}
        for p in range(xplan.num_ranks):
            if p != rank and "s" in xplan.exchanged(rank, p):
                self.remote[p, "s"] = comm.exchange_memory(self.scratch, p).array
        self.port_remote = exchange(proxy, xplan, rank, "s", {"s": self.scratch}) if proxy is not None else {}
        self._staging = None

    def staging(self, layout: MessageLayout, inplace: bool) -> tuple:
        """Library-owned (input, output) kernel buffers for the bucket: registrable, padded to whole chunks."""
        if self._staging is None:
            gpu = self.xplan.plan.gpus[self.rank]
            if inplace:
                space = alloc(layout.io.size * self.bucket)
                self._staging = (space, space)
            else:
                self._staging = (alloc(max(16, gpu.input_chunks * self.bucket)),
                                 alloc(max(16, gpu.output_chunks * self.bucket)))
        return self._staging


def _registrable(comm, view) -> bool:
    try:
        comm.register_memory(view)
    except (InvalidUsageError, BackendError):
        return False
    return True


def _ranges_overlap(a, b) -> bool:
    return a.ptr < b.ptr + b.nbytes and b.ptr < a.ptr + a.nbytes


class Binding:
    """The kernel's view of one call's buffers: input/output arrays, peers' buffers, copies in and out.

    Direct: the user's buffers are the kernel's (sizes split into whole chunks, and registrable when peers
    reach them). Staged: the kernel runs on the scratch set's buffers; parts are copied in and out. A
    ``checked`` call is staged rather than copy its input into the user's receive buffer before the kernel
    (which the call check comes after): only the copies out wait on the check's verdict.
    """

    def __init__(self, comm, xplan: ExecutionPlan, scratch: ScratchSet, layout: MessageLayout,
                 send, send_info, recv, recv_info, proxy=None, checked: bool = False):
        rank = comm.rank
        plan = xplan.plan
        gpu = plan.gpus[rank]
        chunk = layout.chunk
        in_bytes, out_bytes = gpu.input_chunks * chunk, gpu.output_chunks * chunk
        self.pre: list[tuple] = []   # (dst view, src view): before the kernel
        self.post: list[tuple] = []  # after the kernel
        user_send, user_recv = as_bytes(send), as_bytes(recv)
        self.direct = layout.exact and (plan.inplace or not _ranges_overlap(send_info, recv_info))
        if self.direct:
            kin, kout = self._direct_views(layout, plan.inplace, user_send, send_info, user_recv, recv_info,
                                           in_bytes, out_bytes)
            if (checked and self.pre) or (xplan.remote_io and not (_registrable(comm, kin) and
                                                                   _registrable(comm, kout))):
                self.direct, self.pre, self.post = False, [], []
        if not self.direct:
            space_in, space_out = scratch.staging(layout, plan.inplace)
            io = layout.io
            kin = space_in[io.input_offset * chunk:io.input_offset * chunk + in_bytes] if plan.inplace \
                else space_in[:in_bytes]
            kout = space_out[io.output_offset * chunk:io.output_offset * chunk + out_bytes] if plan.inplace \
                else space_out[:out_bytes]
            self.pre = [(kin[k:k + layout.part], user_send[u:u + layout.part]) for u, k in layout.in_slots()]
            self.post = [(user_recv[u:u + layout.part], kout[k:k + layout.part]) for u, k in layout.out_slots()]
        self.kin, self.kout = kin, kout
        self.keep = (send, recv)  # the buffers peers may have mapped stay alive with the binding
        remote = dict(scratch.remote)
        for p in range(plan.num_ranks):
            if p == rank:
                continue
            for code in xplan.exchanged(rank, p):
                if code in "io":
                    remote[p, code] = comm.exchange_memory(kin if code == "i" else kout, p).array
        # a buffer reached only through port channels has no mapping here: the kernel names it by proxy id
        self.remote = [remote.get((rb.rank, rb.type), scratch.scratch) for rb in gpu.remote_buffers]
        self.port_ids = None  # the proxy memory ids the kernel's port ops name
        if proxy is not None:
            ports = {**scratch.port_remote, **exchange(proxy, xplan, rank, "io", {"i": kin, "o": kout})}
            self.port_ids = memory_ids(proxy, xplan, rank, {"i": kin, "o": kout, "s": scratch.scratch}, ports)

    def _direct_views(self, layout, inplace, user_send, send_info, user_recv, recv_info, in_bytes, out_bytes):
        """(kin, kout) on the user's buffers, and the copies that put the input where an in-place plan reads it."""
        if not inplace:
            return user_send[:in_bytes], user_recv[:out_bytes]
        io, chunk = layout.io, layout.chunk
        space, info = (user_recv, recv_info) if recv_info.nbytes >= send_info.nbytes else (user_send, send_info)
        if info.nbytes != io.size * chunk:
            raise PlanError(f"in-place plan: the {info.nbytes}-byte buffer does not hold the {io.size * chunk} "
                            "bytes of input and output")
        i0, o0 = io.input_offset * chunk, io.output_offset * chunk
        kin, kout = space[i0:i0 + in_bytes], space[o0:o0 + out_bytes]
        if space is user_recv and send_info.ptr != recv_info.ptr + i0:
            self.pre.append((kin, user_send[:in_bytes]))
        if space is user_send and recv_info.ptr != send_info.ptr + o0:
            self.post.append((user_recv[:out_bytes], kout))
        return kin, kout


class Copies:
    """(dst, src) device copies of equal-sized views, resolved once to pointers; ``run`` issues them in order.
    With ``call_check`` (``callcheck.area.CallCheck``) each copies only if the call check of the kernel before
    it found the ranks' calls alike: a copy kernel reading the verdict (the simulator reads it on the host)."""

    def __init__(self, pairs: list[tuple], call_check: CallCheck | None = None):
        self.pairs, self.call_check = pairs, call_check
        self.raw = [(dst.__cuda_array_interface__["data"][0], src.__cuda_array_interface__["data"][0], dst.size)
                    for dst, src in pairs if dst.size] if not IS_SIM and call_check is None else []
        self.gated = [call_check.copy_launch(dst, src) for dst, src in pairs if dst.size] \
            if not IS_SIM and call_check is not None else []

    def run(self, stream: int) -> None:
        """Copy on ``stream`` (the simulator copies at once)."""
        if IS_SIM:
            if self.call_check is None or self.call_check.agreed():
                for dst, src in self.pairs:
                    dst._ary[:] = src._ary
            return
        for launch in self.gated:
            launch.launch(stream)
        from ..runtime.launch import copy_async
        for dst, src, nbytes in self.raw:
            copy_async(dst, src, nbytes, stream)
