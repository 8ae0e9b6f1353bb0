"""The reference interpreter: all ranks' thread blocks of a plan run concurrently in one process, on numpy.

A random (seeded) schedule repeatedly picks a runnable thread block and executes its next op atomically.
Signals, waits, flushes, barriers, semaphores and kernel boundaries move vector clocks; memory accesses are
checked against them (``memory.Space``), so any unsynchronized pair of accesses to the same bytes is reported
whatever the schedule. A plan is run for several back-to-back executions (the host reads each rank's output
after its kernel and writes fresh input before the next), which exposes missing handshakes between runs.
LL packets carry the execution number as flag; double scratch buffers alternate halves per execution.
A relaxed signal conveys only what was ordered before its kernel started (a kernel launch is a full fence).
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from ...plan.layout import io_layout
from ...plan.opcodes import DATA_OPS, LP, PACKET_ROLES, PORT_ASYNC_OPS, RP, SP, SWITCH_ROLES, R, roles
from ...plan import BufferRef, Plan
from .errors import DeadlockError, RaceError
from .memory import Space
from .state import MicroOp, Proxy, SignalQueue, Site, TbState

_REDUCE: dict[str, Callable] = {"sum": np.add, "min": np.minimum, "max": np.maximum}


def split_offset(size: int, index: int, slices: int, align: int) -> int:
    """Byte offset of slice ``index`` of ``slices`` of a ``size``-byte range, split in ``align``-byte units
    with the remainder spread over the first slices (the MSCCL++ executor's thread-block-group split)."""
    q, r = divmod(size // align, slices)
    return (index * q + min(index, r)) * align


class Machine:
    """Interprets ``plan`` with ``chunk_bytes`` per chunk and elements of ``dtype``."""

    def __init__(self, plan: Plan, dtype: np.dtype, chunk_bytes: int, executions: int, seed: int):
        self.plan = plan
        self.dtype = np.dtype(dtype)
        self.chunk = chunk_bytes
        self.executions = executions
        self.rng = np.random.default_rng(seed)
        self.double = plan.use_double_scratch_buffer
        self.layouts = [io_layout(plan.collective, plan.inplace, g.id, g.input_chunks, g.output_chunks) for g in plan.gpus]
        cell = plan.buffer_alignment
        self.io = [Space(lay.size * chunk_bytes, cell) for lay in self.layouts]
        self.half = [g.scratch_chunks * chunk_bytes for g in plan.gpus]
        self.scratch = [Space(h * (2 if self.double else 1), cell) for h in self.half]
        self.sites: list[Site] = []
        self._proxy_sites: dict[int, int] = {}

        tb_keys = [(g.id, tb.id) for g in plan.gpus for tb in g.threadblocks]
        proxy_keys = [(g.id, c) for g in plan.gpus for c in range(len(g.channels.get("port", [])))]
        n_actors = len(tb_keys) + len(proxy_keys) + plan.num_ranks
        self.n_actors = n_actors
        self.host_actor = [len(tb_keys) + len(proxy_keys) + r for r in range(plan.num_ranks)]
        self.proxies = {key: Proxy(len(tb_keys) + i, np.zeros(n_actors, np.int64)) for i, key in enumerate(proxy_keys)}
        self.tbs: list[TbState] = []
        for actor, (r, t) in enumerate(tb_keys):
            micro = self._micro_ops(r, t)
            self.tbs.append(TbState(r, t, actor, micro, np.zeros(n_actors, np.int64), np.zeros(n_actors, np.int64)))
        self.tbs_of = [[tb for tb in self.tbs if tb.rank == r] for r in range(plan.num_ranks)]
        self.queues: dict[tuple, SignalQueue] = {}
        self.semaphores = {(g.id, s): [np.zeros(n_actors, np.int64) for _ in range(v)]
                           for g in plan.gpus for s, v in enumerate(g.semaphores)}
        self.sem_taken = {key: 0 for key in self.semaphores}
        self.barriers: dict[tuple[int, int], list[TbState]] = {}
        self.rank_exec = [1] * plan.num_ranks
        self.host_vc = [np.zeros(n_actors, np.int64) for _ in range(plan.num_ranks)]
        self.outputs: list[list[np.ndarray | None]] = [[None] * plan.num_ranks for _ in range(executions)]
        self.packet_vcs = [np.zeros(n_actors, np.int64)]  # knowledge carried by packets, see memory.Space
        self.ops_executed = 0

    # -- setup ------------------------------------------------------------------------------------

    def _site(self, text: str) -> int:
        self.sites.append(Site(text))
        return len(self.sites) - 1

    def _micro_ops(self, r: int, t: int) -> list[MicroOp]:
        micro = []
        for i, op in enumerate(self.plan.gpus[r].threadblocks[t].ops):
            if op.name != "pipeline":
                micro.append(MicroOp(op, self._site(f"rank {r} tb {t} ops[{i}] ({op.name})")))
                continue
            unit, num_chunks = op.iter_context
            sites = [self._site(f"rank {r} tb {t} ops[{i}].ops[{j}] ({inner.name})") for j, inner in enumerate(op.ops)]
            for it in range(math.ceil(num_chunks * self.chunk / unit)):
                micro.extend(MicroOp(inner, sites[j], (it * unit, unit)) for j, inner in enumerate(op.ops))
        return micro

    def _proxy_site(self, site: int) -> int:
        if site not in self._proxy_sites:
            self._proxy_sites[site] = self._site(f"{self.sites[site]} through its port channel's proxy")
        return self._proxy_sites[site]

    def _io_view(self, r: int, code: str) -> tuple[int, int]:
        gpu = self.plan.gpus[r]
        lo = self.layouts[r].offset(code) * self.chunk
        return lo, lo + gpu.chunks(code) * self.chunk

    def write_input(self, r: int, data: np.ndarray) -> None:
        lo, hi = self._io_view(r, "i")
        self.io[r].data[lo:hi] = np.ascontiguousarray(data, dtype=self.dtype).view(np.uint8)

    def fill_io(self, r: int, data: np.ndarray) -> None:
        """Initial contents of rank ``r``'s io space (before the input is written)."""
        self.io[r].data[:] = np.ascontiguousarray(data, dtype=self.dtype).view(np.uint8)[: self.io[r].data.size]

    # -- main loop --------------------------------------------------------------------------------

    def run(self, inputs: Sequence[Sequence[np.ndarray]]) -> list[list[np.ndarray]]:
        """Execute all executions; ``inputs[k][r]`` is rank r's input for execution k+1 (index 0 already written)."""
        self.inputs = inputs
        while True:
            changed = self._finish_kernels()
            live = [tb for tb in self.tbs if self.rank_exec[tb.rank] <= self.executions and not tb.at_end]
            if not live:
                if all(k > self.executions for k in self.rank_exec):
                    return self.outputs
                continue
            progressed = False
            for i in self.rng.permutation(len(live)):
                tb = live[i]
                for _ in range(int(self.rng.integers(1, 5))):
                    if tb.at_end or not self._step(tb):
                        break
                    progressed = True
            if not (progressed or changed):
                raise DeadlockError("deadlock: no thread block can make progress\n" + "\n".join(
                    f"  {self.sites[tb.micro[tb.pc].site]}, execution {tb.execution}: {self._blocked_reason(tb)}"
                    for tb in live))

    def _step(self, tb: TbState) -> bool:
        mo = tb.micro[tb.pc]
        name = mo.op.name
        if name in DATA_OPS:
            done = self._data(tb, mo)
        else:
            done = getattr(self, f"_op_{name}")(tb, mo)
        if done:
            tb.pc += 1
            self.ops_executed += 1
        return done

    # -- kernel boundaries and the host -------------------------------------------------------------

    def _finish_kernels(self) -> bool:
        changed = False
        for r in range(self.plan.num_ranks):
            if self.rank_exec[r] <= self.executions and all(tb.at_end for tb in self.tbs_of[r]):
                self._kernel_end(r)
                changed = True
        return changed

    def _kernel_end(self, r: int) -> None:
        """Rank r's kernel for execution k finished: the host reads the output, then writes the next input."""
        k = self.rank_exec[r]
        host = self.host_actor[r]
        known = self.host_vc[r]
        for tb in self.tbs_of[r]:
            np.maximum(known, tb.knowledge(), out=known)
        known[host] = 2 * k - 1
        lo, hi = self._io_view(r, "o")
        site = self._site(f"the host reading rank {r}'s output after execution {k}")
        if hi > lo:
            conflict = self.io[r].check_read(lo, hi, known, packet=False)
            if conflict is not None:
                raise RaceError(f"race on rank {r} {self._describe(r, 'io', conflict.offset)}: {self.sites[site]}, but "
                                f"{self.sites[conflict.site]} {'wrote' if conflict.earlier_write else 'read'} it without "
                                f"being ordered before the end of rank {r}'s kernel (a missing signal/wait?)")
            self.io[r].record_read(lo, hi, host, 2 * k, site)
        self.outputs[k - 1][r] = self.io[r].data[lo:hi].view(self.dtype).copy()
        self.rank_exec[r] = k + 1
        if k == self.executions:
            return
        known[host] = 2 * k
        lo, hi = self._io_view(r, "i")
        site = self._site(f"the host writing rank {r}'s input for execution {k + 1}")
        conflict = self.io[r].check_write(lo, hi, known) if hi > lo else None
        if conflict is not None:
            raise RaceError(f"race on rank {r} {self._describe(r, 'io', conflict.offset)}: {self.sites[site]}, but "
                            f"{self.sites[conflict.site]} {'wrote' if conflict.earlier_write else 'read'} it in execution "
                            f"{k} without being ordered before the end of rank {r}'s kernel (a missing signal/wait?)")
        if hi > lo:
            self.io[r].record_write(lo, hi, host, 2 * k + 1, site, packet=False, flag=0)
            self.write_input(r, self.inputs[k][r])
        known[host] = 2 * k + 1
        for tb in self.tbs_of[r]:
            tb.start_kernel(known, k + 1)

    # -- memory access ------------------------------------------------------------------------------

    def _region(self, tb: TbState, mo: MicroOp, ref: BufferRef) -> tuple[Space, int, int, int, str]:
        """(space, lo, hi, owner rank, space name) of the bytes ``ref`` names for this op on this thread block."""
        if ref.remote:
            rb = self.plan.remote_buffer(tb.rank, tb.id, mo.op.channel_type, ref.buffer_id)
            return self._place(tb, mo, ref, rb.rank, rb.type)
        return self._place(tb, mo, ref, tb.rank, ref.type)

    def _regions(self, tb: TbState, mo: MicroOp, refs: list[BufferRef], rls: list[str]) -> tuple[list, list[str]]:
        """Regions and roles of an op's buffers; a switch ref becomes the same range on every rank of its group
        (what a multimem load reduces over, or a multimem store writes), each a remote access."""
        regions, out_roles = [], []
        for ref, role in zip(refs, rls):
            if role in SWITCH_ROLES:
                sc = self.plan.switch_channel(tb.rank, tb.id, ref.switch_channel_id)
                regions += [self._place(tb, mo, ref, rank, sc.buffer_type) for rank in sc.ranks]
                out_roles += [RP if role == SP else R] * len(sc.ranks)
            else:
                regions.append(self._region(tb, mo, ref))
                out_roles.append(role)
        return regions, out_roles

    def _place(self, tb: TbState, mo: MicroOp, ref: BufferRef, owner: int, code: str) -> tuple[Space, int, int, int, str]:
        op = mo.op
        size = ref.size * self.chunk
        if code == "s":
            space, kind = self.scratch[owner], "s"
            lo = ref.index * self.chunk + ((tb.execution - 1) % 2) * self.half[owner] * self.double
        else:
            space, kind = self.io[owner], "io"
            lo = (self.layouts[owner].offset(code) + ref.index) * self.chunk
        if op.tbg is not None:
            index, slices = op.tbg
            start = split_offset(size, index, slices, self.plan.buffer_alignment)
            size = split_offset(size, index + 1, slices, self.plan.buffer_alignment) - start
            lo += start
        if mo.window is not None:
            offset, unit = mo.window
            size = max(0, min(size - offset, unit))
            lo += offset
        return space, lo, lo + size, owner, kind

    def _describe(self, owner: int, kind: str, offset: int) -> str:
        if kind == "s":
            half = self.half[owner]
            extra = " (second half of the double scratch buffer)" if self.double and half and offset >= half else ""
            return f"scratch chunk {(offset % half if half else offset) // self.chunk}{extra}"
        names = []
        for code, label in (("i", "input"), ("o", "output")):
            lo, hi = self._io_view(owner, code)
            if lo <= offset < hi:
                names.append(f"{label} chunk {(offset - lo) // self.chunk}")
        return " = ".join(names) or f"io byte {offset}"

    def _race(self, tb: TbState, site: int, owner: int, kind: str, write: bool, conflict) -> RaceError:
        return RaceError(
            f"race on rank {owner} {self._describe(owner, kind, conflict.offset)}: {self.sites[site]} "
            f"{'writes' if write else 'reads'} it in execution {tb.execution}, but "
            f"{self.sites[conflict.site]} {'wrote' if conflict.earlier_write else 'read'} it with no "
            f"synchronization in between")

    def _performers(self, tb: TbState, mo: MicroOp, n_src: int, n_dst: int) -> tuple[list, list, list[Proxy]]:
        """(actor, vc, stamp, site) performing each src and dst access: the thread block itself, or on port
        channels each destination's proxy, which accepts the put now and performs it asynchronously."""
        me = (tb.actor, tb.vc, tb.epoch, mo.site)
        op = mo.op
        if not (op.channel_type == "port" and op.name in PORT_ASYNC_OPS):
            return [me] * n_src, [me] * n_dst, []
        dst, proxies = [], []
        for cid in op.channel_ids:
            proxy = self.proxies[(tb.rank, self.plan.channel(tb.rank, tb.id, "port", cid))]
            stamp = proxy.issue(tb.vc)
            proxies.append(proxy)
            dst.append((proxy.actor, proxy.vc.copy(), stamp, self._proxy_site(mo.site)))
        src = [dst[i] if DATA_OPS[op.name].paired else dst[0] for i in range(n_src)]
        return src, dst, proxies

    def _carried(self, srcs: list, src_roles: list[str]) -> np.ndarray:
        """What the packets an op reads causally follow (see ``memory.Space``)."""
        carried = np.zeros(self.n_actors, np.int64)
        for (space, lo, hi, _, _), role in zip(srcs, src_roles):
            if role == LP and hi > lo:
                for ref in space.packet_knowledge(lo, hi):
                    np.maximum(carried, self.packet_vcs[ref], out=carried)
        return carried

    def _results(self, mo: MicroOp, srcs: list, n_dst: int) -> list[np.ndarray]:
        """The value each destination receives: the reduction of all sources, or its paired / the only source."""
        shape = DATA_OPS[mo.op.name]
        values = [space.data[lo:hi].view(self.dtype).copy() for space, lo, hi, _, _ in srcs]
        if shape.reduces:
            result = values[0]
            for v in values[1:]:
                result = _REDUCE[mo.op.reduce_op or "sum"](result, v)
            return [result] * n_dst
        return values if shape.paired else [values[0]] * n_dst

    def _data(self, tb: TbState, mo: MicroOp) -> bool:
        """Execute a data op atomically, after checking its packets are ready and none of its accesses races."""
        op = mo.op
        src_roles, dst_roles = roles(op.name, len(op.src_buff), len(op.dst_buff))
        srcs, src_roles = self._regions(tb, mo, op.src_buff, src_roles)
        dsts, dst_roles = self._regions(tb, mo, op.dst_buff, dst_roles)
        for (space, lo, hi, _, _), role in zip(srcs, src_roles):
            if role == LP and hi > lo and not space.packets_ready(lo, hi, tb.execution):
                return False
        src_by, dst_by, proxies = self._performers(tb, mo, len(srcs), len(dsts))
        reads = [(s, role in PACKET_ROLES, who) for s, role, who in zip(srcs, src_roles, src_by)]
        writes = [(d, role in PACKET_ROLES, who) for d, role, who in zip(dsts, dst_roles, dst_by)]
        carried = self._carried(srcs, src_roles)
        for write, accesses in ((False, reads), (True, writes)):
            for (space, lo, hi, owner, kind), packet, (_, vc, _, site) in accesses:
                if hi <= lo:
                    continue
                conflict = (space.check_write(lo, hi, vc, np.maximum(vc, carried)) if write
                            else space.check_read(lo, hi, vc, packet))
                if conflict is not None:
                    raise self._race(tb, site, owner, kind, write, conflict)
        results = self._results(mo, srcs, len(dsts))
        for (space, lo, hi, _, _), _, (actor, _, stamp, site) in reads:
            if hi > lo:
                space.record_read(lo, hi, actor, stamp, site)
        for ((space, lo, hi, _, _), packet, (actor, vc, stamp, site)), value in zip(writes, results):
            if hi > lo:
                knowledge = 0
                if packet:
                    self.packet_vcs.append(np.maximum(vc, carried))
                    self.packet_vcs[-1][actor] = stamp
                    knowledge = len(self.packet_vcs) - 1
                space.record_write(lo, hi, actor, stamp, site, packet, tb.execution, knowledge)
                space.data[lo:hi] = value[: (hi - lo) // self.dtype.itemsize].view(np.uint8)
        if op.name in ("pws", "pwsf"):
            for i, proxy in enumerate(proxies):
                self._queue("port", tb.rank, self.plan.channel(tb.rank, tb.id, "port", op.channel_ids[i])).push(
                    np.maximum(tb.vc, proxy.completed()), tb.start_vc)
                if op.name == "pwsf":
                    np.maximum(tb.pending, proxy.completed(), out=tb.pending)
        return True

    # -- synchronization ops --------------------------------------------------------------------

    def _queue(self, ctype: str, rank: int, channel: int) -> SignalQueue:
        return self.queues.setdefault((ctype, rank, channel), SignalQueue())

    def _channels(self, tb: TbState, mo: MicroOp) -> list[int]:
        return [self.plan.channel(tb.rank, tb.id, mo.op.channel_type, cid) for cid in mo.op.channel_ids]

    def _op_nop(self, tb: TbState, mo: MicroOp) -> bool:
        tb.sync()
        return True

    def _op_signal(self, tb: TbState, mo: MicroOp) -> bool:
        ctype = mo.op.channel_type
        for c in self._channels(tb, mo):
            if ctype == "port":
                message = np.maximum(tb.vc, self.proxies[(tb.rank, c)].completed())
            elif mo.op.name == "rlxsignal":
                message = tb.start_vc
            else:
                message = tb.vc.copy()
            self._queue(ctype, tb.rank, c).push(message, tb.start_vc)
        return True

    _op_rlxsignal = _op_signal

    def _incoming(self, tb: TbState, mo: MicroOp) -> list[SignalQueue | None]:
        out = []
        for c in self._channels(tb, mo):
            peer, back = self.plan.paired_channel(tb.rank, mo.op.channel_type, c)
            out.append(None if back is None else self._queue(mo.op.channel_type, peer, back))
        return out

    def _op_wait(self, tb: TbState, mo: MicroOp) -> bool:
        queues = self._incoming(tb, mo)
        if any(q is None or len(q.joined) <= q.consumed for q in queues):
            return False
        relaxed = mo.op.name == "rlxwait" and mo.op.channel_type == "memory"
        for q in queues:
            np.maximum(tb.pending, (q.launched if relaxed else q.joined)[q.consumed], out=tb.pending)
            q.consumed += 1
        return True

    _op_rlxwait = _op_wait

    def _op_flush(self, tb: TbState, mo: MicroOp) -> bool:
        for c in self._channels(tb, mo):
            np.maximum(tb.pending, self.proxies[(tb.rank, c)].completed(), out=tb.pending)
        return True

    def _op_barrier(self, tb: TbState, mo: MicroOp) -> bool:
        if tb.at_barrier:
            return False
        key = (tb.rank, mo.op.barrier_id)
        arrived = self.barriers.setdefault(key, [])
        arrived.append(tb)
        tb.at_barrier = True
        if len(arrived) < mo.op.num_threadblocks:
            return False
        known = np.maximum.reduce([t.knowledge() for t in arrived])
        for t in arrived:
            t.vc = known.copy()
            t.pending[:] = 0
            t.epoch += 1
            t.vc[t.actor] = t.epoch - 1
            t.at_barrier = False
            if t is not tb:
                t.pc += 1
                self.ops_executed += 1
        del self.barriers[key]
        return True

    def _op_sem_release(self, tb: TbState, mo: MicroOp) -> bool:
        for s in mo.op.semaphore_ids:
            self.semaphores[(tb.rank, s)].append(tb.vc.copy())
        return True

    def _op_sem_acquire(self, tb: TbState, mo: MicroOp) -> bool:
        keys = [(tb.rank, s) for s in mo.op.semaphore_ids]
        if any(self.sem_taken[k] >= len(self.semaphores[k]) for k in keys):
            return False
        for k in keys:
            np.maximum(tb.pending, self.semaphores[k][self.sem_taken[k]], out=tb.pending)
            self.sem_taken[k] += 1
        return True

    # -- diagnostics ------------------------------------------------------------------------------

    def _blocked_reason(self, tb: TbState) -> str:
        op = tb.micro[tb.pc].op
        mo = tb.micro[tb.pc]
        if op.name in ("wait", "rlxwait"):
            parts = []
            for c, q in zip(self._channels(tb, mo), self._incoming(tb, mo)):
                peer = self.plan.gpus[tb.rank].channels[op.channel_type][c]
                if q is None:
                    parts.append(f"{op.channel_type} channel {c} to rank {peer} has no paired channel on rank {peer}, "
                                 f"so no signal can ever arrive")
                elif len(q.joined) <= q.consumed:
                    parts.append(f"waits for signal number {q.consumed + 1} on {op.channel_type} channel {c} from "
                                 f"rank {peer}, which sent {len(q.joined)}")
            return "; ".join(parts)
        if op.name == "barrier":
            n = len(self.barriers.get((tb.rank, op.barrier_id), []))
            return f"barrier {op.barrier_id} needs {op.num_threadblocks} thread blocks, {n} arrived"
        if op.name == "sem_acquire":
            return f"semaphores {op.semaphore_ids} are never released enough"
        src_roles, _ = roles(op.name, len(op.src_buff), len(op.dst_buff))
        for ref, role in zip(op.src_buff, src_roles):
            space, lo, hi, owner, kind = self._region(tb, mo, ref)
            if role == LP and hi > lo and not space.packets_ready(lo, hi, tb.execution):
                return (f"waits for LL packets of execution {tb.execution} in rank {owner} "
                        f"{self._describe(owner, kind, lo)} that are never written")
        return "blocked"
