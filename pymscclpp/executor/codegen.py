"""Generate the Python source of one rank's kernel for a plan: straight-line calls, no op interpreter.

Each plan thread block becomes a device function whose body is the block's ops in order, with buffer
offsets as expressions of the chunk size (a constant for small chunks). Thread blocks whose code differs only
in integer constants (instance replicas) share one function taking the block's index in its class, so a
128-instance plan compiles one body, not 128. Reductions become device functions specialised for their
number of sources and destinations. A ``checked`` kernel first runs the cross-rank call check (every block,
``callcheck.device.checked_call``) and returns before any op when the ranks' calls differ. Two variants:

- GPU: one CUDA block per plan thread block; ``nop`` is ``syncthreads``.
- simulator: ONE CUDA block in which thread group ``g`` (``T`` threads) plays plan thread block ``g``, so
  blocks that wait on each other make progress (the simulator runs CUDA blocks one after another);
  ``nop`` is a barrier of the group's threads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from ..runtime.fifo import TRIGGER_DATA, TRIGGER_FLAG, TRIGGER_SYNC
from ..plan.opcodes import DATA_OPS, LP, PACKET_ROLES, PORT_ASYNC_OPS, RP, roles
from ..plan import BufferRef, Op, ThreadBlock
from .plan import ExecutionPlan


def _safe_name(name: str) -> str:
    """A plan name fit for the generated module's docstring: letters, digits and ``_.-`` only, so a
    hostile name cannot close the docstring and inject code."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", str(name))[:80]


_BUF = {"i": "inp", "o": "out", "s": "scr"}
_INT = re.compile(r"(?<![\w.])\d+(?![\w.])")  # a standalone integer literal (not part of a name or float)
_SIGNAL = {"signal": "S.signal", "rlxsignal": "S.relaxed_signal", "wait": "S.wait", "rlxwait": "S.wait"}
_PORT_SYNC = {"signal": "PC.signal", "rlxsignal": "PC.signal", "wait": "PC.wait", "rlxwait": "PC.wait",
              "flush": "PC.flush"}
_PORT_PUT = {"put": TRIGGER_DATA, "pws": TRIGGER_DATA | TRIGGER_FLAG,
             "pwsf": TRIGGER_DATA | TRIGGER_FLAG | TRIGGER_SYNC}
_LOCAL_ID = {"i": 0, "o": 1, "s": 2}  # ports.LOCAL_IDS: the kernel's proxy memory ids of its own buffers


@dataclass(frozen=True)
class StateLayout:
    """Offsets into the uint64 state array of one rank: flags, barrier counters, semaphores, group barriers."""

    threadblocks: int
    barriers: int
    semaphores: int

    @property
    def barrier_base(self) -> int:
        return self.threadblocks

    @property
    def semaphore_base(self) -> int:
        return self.threadblocks + self.barriers

    @property
    def group_base(self) -> int:
        return self.semaphore_base + self.semaphores

    @property
    def words(self) -> int:
        return self.group_base + 2 * self.threadblocks


def state_layout(xplan: ExecutionPlan, rank: int) -> StateLayout:
    gpu = xplan.plan.gpus[rank]
    return StateLayout(len(gpu.threadblocks), len(xplan.barrier_ids), len(gpu.semaphores))


def launch_dims(xplan: ExecutionPlan, rank: int, sim_threads: int) -> tuple[int, int]:
    """(grid, block) of ``rank``'s kernel: a block per plan thread block, or (simulator variant, ``sim_threads``
    > 0) one block with ``sim_threads`` threads per plan thread block."""
    ntb = len(xplan.plan.gpus[rank].threadblocks)
    if sim_threads:
        return 1, ntb * sim_threads
    return ntb, xplan.plan.num_threads_per_block


@dataclass(frozen=True)
class KernelSpec:
    """Everything one generated kernel depends on."""

    xplan: ExecutionPlan
    rank: int
    kind: int | None  # reduction dtype kind (channels.reduce.DTYPE_KINDS); None when the plan never reduces
    op: int           # reduction op code (channels.reduce.OPS)
    itemsize: int     # bytes per element of ``kind``
    size_class: int   # chunk bytes built into the kernel, or 0: the chunk size is an argument
    sim_threads: int  # 0: the GPU variant; else threads per plan thread block in the simulator variant
    checked: bool = False  # takes the call check's handle ``call_check`` and the call's fingerprint ``fingerprint``

    @cached_property
    def peers(self) -> list[int]:
        """Peers with semaphore tokens, in argument order."""
        return [p for p in self.xplan.peers(self.rank) if self.xplan.tokens(self.rank, p)]

    @cached_property
    def arg_names(self) -> list[str]:
        """Kernel parameters in order."""
        gpu = self.xplan.plan.gpus[self.rank]
        names = ["inp", "out", "scr"] + [f"rb{j}" for j in range(len(gpu.remote_buffers))]
        names += [f"sem{p}" for p in self.peers]
        ports = len(gpu.channels.get("port", []))
        names += [f"pc{c}" for c in range(ports)] + (["pid"] if ports else [])
        names += ["st", "err", "abort_flag", "timeout_ns", "wait_context"]
        names += ["call_check", "fingerprint"] if self.checked else []
        return names + ([] if self.size_class else ["chunk"])

    @property
    def launch_dims(self) -> tuple[int, int]:
        """(grid, block) of a launch."""
        return launch_dims(self.xplan, self.rank, self.sim_threads)

    def source(self) -> str:
        """The module's Python source."""
        return _Writer(self).module()


class _Writer:
    """Emits the module for a ``KernelSpec``."""

    def __init__(self, spec: KernelSpec):
        self.spec = spec
        self.xplan = spec.xplan
        self.plan = spec.xplan.plan
        self.gpu = self.plan.gpus[spec.rank]
        self.state = state_layout(spec.xplan, spec.rank)
        self.helpers: dict[str, list[str]] = {}
        scratch = self.gpu.scratch_chunks * (2 if self.plan.use_double_scratch_buffer else 1)
        self.stage_next = scratch  # next staging slot of a port put-packets op, in packet-wide chunks
        self.sync = ("D.group_sync(st, GROUPS, g, nt, err, abort_flag, RANK, timeout_ns)" if spec.sim_threads
                     else "cuda.syncthreads()")
        # what ops take
        self.common = ", ".join(n for n in spec.arg_names if n not in ("call_check", "fingerprint", "chunk"))

    # -- module -----------------------------------------------------------------------------------

    def module(self) -> str:
        spec, plan = self.spec, self.plan
        self.classes = _template_classes([self.threadblock(tb) for tb in self.gpu.threadblocks])
        variant = f"simulator, {spec.sim_threads} threads per thread block" if spec.sim_threads else "GPU"
        head = [
            f'"""Executor kernel of plan {_safe_name(plan.name)} ({self.xplan.key}), rank {spec.rank}: {variant}, '
            f'{"chunk " + str(spec.size_class) + " bytes" if spec.size_class else "any chunk size"}.',
            "",
            'Generated by pymscclpp.executor.codegen; regenerated when the plan or pymscclpp changes."""',
            "",
            "import numpy as np",
            "from numba import cuda",
            "",
            "from pymscclpp.channels import port_channel as PC",
            "from pymscclpp.channels import primitives as P",
            "from pymscclpp.channels import reduce as R",
            "from pymscclpp.channels import semaphore as S",
            "from pymscclpp.channels.device_errors import OP_PACKET",
            "from pymscclpp.channels.ptx import address_of, load_v4, store_v4, store_v4_volatile",
            "from pymscclpp.executor import device as D",
            "",
            f"RANK = {spec.rank}",
            f"KIND = {spec.kind if spec.kind is not None else -1}",
            f"OP = {spec.op}",
            f"ITEMSIZE = {spec.itemsize}",
            f"ALIGN = {plan.buffer_alignment}",
            f"PK = {2 if self.xplan.uses_packets else 1}  # scratch bytes per data byte (LL16 packets)",
            f"BARRIERS = {self.state.barrier_base}",
            f"SEMAPHORES = {self.state.semaphore_base}",
            f"GROUPS = {self.state.group_base}",
            "_U15 = np.uint64(15)",
            "_Z = np.uint64(0)",
        ]
        if spec.size_class:
            head.append(f"CHUNK = {spec.size_class}")
        if spec.sim_threads:
            head.append(f"T = {spec.sim_threads}")
        if spec.checked:
            head += ["from pymscclpp.callcheck.device import checked_call",
                     "from pymscclpp.channels.device_errors import OP_CALLCHECK", f"NRANKS = {self.xplan.num_ranks}"]
        body = []
        for lines in self.helpers.values():
            body += ["", ""] + lines
        for c, (lines, tbs) in enumerate(self.classes):
            body += ["", ""] + _class_function(c, lines, tbs, self.common)
        body += ["", ""] + self.kernel()
        return "\n".join(head + body) + "\n"

    def kernel(self) -> list[str]:
        spec = self.spec
        # a block of T threads can only launch if each thread fits in 64K registers / T
        regs = min(255, 65536 // self.plan.num_threads_per_block // 8 * 8)
        out = ["@cuda.jit" if spec.sim_threads else f"@cuda.jit(cache=True, max_registers={regs})",
               f"def kernel({', '.join(spec.arg_names)}):"]
        if spec.sim_threads:
            out += ["    g = cuda.threadIdx.x // T", "    tid = cuda.threadIdx.x % T", "    nt = T"]
        else:
            out += ["    g = cuda.blockIdx.x", "    tid = cuda.threadIdx.x", "    nt = cuda.blockDim.x"]
        if spec.checked:  # every rank's call alike, else no op runs (the verdict gates the copies after)
            out += ["    if not checked_call(call_check, fingerprint, RANK, NRANKS, OP_CALLCHECK):", "        return"]
        if spec.size_class:
            out.append("    chunk = CHUNK")
        out.append("    flag = D.flag_begin(st, g)")
        members = {tb: (c, i) for c, (_, tbs) in enumerate(self.classes) for i, tb in enumerate(tbs)}
        order = [members[tb.id] for tb in self.gpu.threadblocks]
        out.append(f"    i = {_lookup([i for _, i in order], 'g')}")
        call = f"tb_class{{}}({self.common}, chunk, tid, nt, g, flag, i)"
        if len(self.classes) == 1:
            out.append("    " + call.format(0))
        else:
            out.append(f"    c = {_lookup([c for c, _ in order], 'g')}")
            for c in range(len(self.classes)):
                out += [f"    {'if' if c == 0 else 'elif'} c == {c}:", "        " + call.format(c)]
        out += [f"    {self.sync}", "    if tid == 0:", "        D.flag_end(st, g, flag)"]
        return out

    # -- thread blocks ----------------------------------------------------------------------------

    def threadblock(self, tb: ThreadBlock) -> tuple[int, list[str]]:
        """(id, body lines) of one plan thread block."""
        self.tb = tb
        out = ["    cs = chunk * PK"]
        if self.plan.use_double_scratch_buffer:
            out.append("    par = (flag - 1) & 1  # which half of the double scratch buffer")
        for i, op in enumerate(tb.ops):
            out.append(f"    # ops[{i}] {op.name}")
            if op.name == "pipeline":
                unit, num_chunks = op.iter_context
                out += [f"    for it in range(({num_chunks} * chunk + {unit - 1}) // {unit}):",
                        f"        w = it * {unit}"]
                for j, inner in enumerate(op.ops):
                    out.append(f"        # ops[{i}].ops[{j}] {inner.name}")
                    out += ["        " + line for line in self.op(inner, unit)]
            else:
                out += ["    " + line for line in self.op(op, None)]
        return tb.id, out

    def op(self, op: Op, unit: int | None) -> list[str]:
        name = op.name
        if name == "nop":
            return [self.sync]
        if name == "barrier":
            pos = self.xplan.barrier_ids.index(op.barrier_id)
            return [self.sync, "if tid == 0:",
                    f"    D.tb_barrier(st, BARRIERS + {pos}, {op.num_threadblocks}, err, abort_flag, RANK, timeout_ns)",
                    self.sync]
        if op.channel_type == "port" and name in _PORT_SYNC:
            out = []
            for j, cid in enumerate(op.channel_ids):
                out += [f"if tid == {j} % nt:", f"    {_PORT_SYNC[name]}(pc{self.tb.channels['port'][cid]})"]
            return out
        if name in _SIGNAL:
            out = []
            for j, cid in enumerate(op.channel_ids):
                peer, token = self.xplan.token(self.spec.rank, self.tb.channels["memory"][cid])
                out += [f"if tid == {j} % nt:", f"    {_SIGNAL[name]}(sem{peer}, {token})"]
            return out
        if name in ("sem_acquire", "sem_release"):
            out = []
            for j, sid in enumerate(op.semaphore_ids):
                call = (f"D.sem_acquire(st, SEMAPHORES + {sid}, err, abort_flag, RANK, timeout_ns)"
                        if name == "sem_acquire" else f"D.sem_release(st, SEMAPHORES + {sid})")
                out += [f"if tid == {j} % nt:", f"    {call}"]
            return out
        return self.data(op, unit)

    # -- data ops ---------------------------------------------------------------------------------

    def region(self, op: Op, size: int, unit: int | None) -> list[str]:
        """Lines setting ``n`` (bytes) and ``lo`` (data offset in each buffer) for this block's share."""
        out = [f"n = {size} * chunk", "lo = 0"]
        if op.tbg is not None:
            index, slices = op.tbg
            out += [f"lo = D.split(n, {index}, {slices}, ALIGN)", f"n = D.split(n, {index + 1}, {slices}, ALIGN) - lo"]
        if unit is not None:
            out += [f"n = min(max(n - w, 0), {unit})", "lo = lo + w"]
        return out

    def where(self, op: Op, ref: BufferRef, packets: bool) -> tuple[str, str]:
        """(array, byte offset expression) of ``ref`` for this block's share (packets: 2 bytes per data byte)."""
        if ref.remote:
            j = self.tb.remote_buffer_refs[op.channel_type][ref.buffer_id]
            rb = self.gpu.remote_buffers[j]
            array, owner, code = f"rb{j}", self.plan.gpus[rb.rank], rb.type
        else:
            array, owner, code = _BUF[ref.type], self.gpu, ref.type
        share = "2 * lo" if packets else "lo"
        if code != "s":
            return array, f"{ref.index} * chunk + {share}"
        if self.plan.use_double_scratch_buffer:
            return array, f"(par * {owner.scratch_chunks} + {ref.index}) * cs + {share}"
        return array, f"{ref.index} * cs + {share}"

    def data(self, op: Op, unit: int | None) -> list[str]:
        if op.channel_type == "port" and op.name in PORT_ASYNC_OPS:
            return self.port_data(op, unit)
        shape = DATA_OPS[op.name]
        src_roles, dst_roles = roles(op.name, len(op.src_buff), len(op.dst_buff))
        srcs = [self.where(op, r, role in PACKET_ROLES) for r, role in zip(op.src_buff, src_roles)]
        dsts = [self.where(op, r, role in PACKET_ROLES) for r, role in zip(op.dst_buff, dst_roles)]
        if shape.paired:
            out = []
            for (sa, so), (da, do), ref, role in zip(srcs, dsts, op.src_buff, dst_roles):
                out += self.region(op, ref.size, unit) + [self.move(sa, so, da, do, src_roles[0], role)]
            return out
        out = self.region(op, op.src_buff[0].size, unit)
        if not shape.reduces:
            if op.name == "rppkt":
                (sa, so), = srcs
                return out + [f"D.forward_packets({da}, {do}, {sa}, {so}, n, tid, nt, flag, wait_context, OP_PACKET)"
                              for da, do in dsts]
            (sa, so), = srcs
            return out + [self.move(sa, so, da, do, src_roles[0], role) for (da, do), role in zip(dsts, dst_roles)]
        if any(r == LP for r in src_roles):
            return out + [self.packet_reduce(srcs, src_roles, dsts, dst_roles)]
        return out + [self.plain_reduce(srcs, dsts)]

    def port_data(self, op: Op, unit: int | None) -> list[str]:
        """A put through the proxy: one thread per destination pushes a trigger naming the memories by id.

        put/pws/pwsf copy plain data. ppkt builds the packets in a staging slot after the scratch, then the
        proxy copies them and is waited for (the slot is reused next execution). rppkt waits for the local
        packets, then the proxy copies them as they are, flags included."""
        out = []
        ports = self.tb.channels["port"]
        if op.name == "rppkt":
            (src,) = op.src_buff
            _, so = self.where(op, src, True)
            out += self.region(op, src.size, unit)
            out += [f"D.await_packets(scr, {so}, n, tid, nt, flag, wait_context, OP_PACKET)", self.sync]
            pairs = [(src, dst, so) for dst in op.dst_buff]
        else:
            pairs = [(src, dst, None) for src, dst in zip(op.src_buff, op.dst_buff)]
        for i, (src, dst, so) in enumerate(pairs):
            packets = op.name in ("ppkt", "rppkt")
            _, do = self.where(op, dst, packets)
            dst_id = f"pid[{3 + self.tb.remote_buffer_refs['port'][dst.buffer_id]}]"
            ch = f"pc{ports[op.channel_ids[i]]}"
            if op.name in _PORT_PUT:
                _, so = self.where(op, src, False)
                out += self.region(op, src.size, unit)
                src_id = f"pid[{_LOCAL_ID[src.type]}]"
                out += [f"if tid == {i} % nt:",
                        f"    D.port_put({ch}, {_PORT_PUT[op.name]}, {dst_id}, {do}, {src_id}, {so}, n)"]
                continue
            if op.name == "ppkt":
                sa, src_off = self.where(op, src, False)
                so = f"{self.stage_next} * cs + 2 * lo"
                self.stage_next += src.size
                out += self.region(op, src.size, unit)
                out += [f"P.put_packets_ll16(scr, {so}, {sa}, {src_off}, n, tid, nt, flag)", self.sync]
            kind = TRIGGER_DATA | (TRIGGER_SYNC if op.name == "ppkt" else 0)
            out += [f"if tid == {i} % nt:",
                    f"    D.port_put({ch}, {kind}, {dst_id}, {do}, pid[2], {so}, D.packet_bytes(n))"]
        return out

    @staticmethod
    def move(sa: str, so: str, da: str, do: str, src_role: str, dst_role: str) -> str:
        if src_role in PACKET_ROLES:
            return (f"P.unpack_packets_ll16({da}, {do}, {sa}, {so}, n, tid, nt, flag, wait_context, OP_PACKET)")
        if dst_role in PACKET_ROLES:
            return f"P.put_packets_ll16({da}, {do}, {sa}, {so}, n, tid, nt, flag)"
        return f"P.copy_bytes({da}, {do}, {sa}, {so}, n, tid, nt)"

    # -- reductions -------------------------------------------------------------------------------

    def plain_reduce(self, srcs: list, dsts: list) -> str:
        k, m = len(srcs), len(dsts)
        name = f"reduce_{k}_{m}"
        if name not in self.helpers:
            self.helpers[name] = _plain_reduce_helper(name, k, m)
        args = [x for pair in dsts + srcs for x in pair]
        return f"{name}({', '.join(args)}, n, tid, nt)"

    def packet_reduce(self, srcs: list, src_roles: list, dsts: list, dst_roles: list) -> str:
        if src_roles[0] != "L" or any(r != LP for r in src_roles[1:]) or dst_roles[0] != "L" or \
                any(r not in (LP, RP) for r in dst_roles[1:]):
            raise AssertionError(f"unexpected packet reduce roles {src_roles} -> {dst_roles}")
        k, m = len(srcs), len(dsts) - 1
        name = f"reduce_packets_{k}_{m}"
        if name not in self.helpers:
            self.helpers[name] = _packet_reduce_helper(name, k, m)
        args = [x for pair in dsts + srcs for x in pair]
        return f"{name}({', '.join(args)}, n, tid, nt, flag, wait_context)"


def _lookup(values: list[int], var: str) -> str:
    """An expression of ``var`` giving ``values[var]``: the constant, ``(a + b * var)`` when affine, else a
    tuple literal indexed at run time. Compound expressions are parenthesised: they replace a literal
    anywhere (``n // 2`` must not become ``n // 2 * i``)."""
    a, b = values[0], (values[1] - values[0] if len(values) > 1 else 0)
    if any(v != a + b * k for k, v in enumerate(values)):
        return "(" + ", ".join(map(str, values)) + f")[{var}]"
    scaled = var if b == 1 else f"{b} * {var}"
    return str(a) if b == 0 else (var if b == 1 else f"({scaled})") if a == 0 else f"({a} + {scaled})"


def _template_classes(blocks: list[tuple[int, list[str]]]) -> list[tuple[list[str], list[int]]]:
    """Group thread blocks whose code is equal up to integer literals: (template lines, block ids) per class.

    In a template, a literal that differs between members becomes ``(a + b * i)`` when it is affine in the
    member index ``i``, else a lookup in a tuple of the members' values, hoisted to the top as ``k<n>``."""
    shapes: dict[tuple, list[tuple[int, list[str]]]] = {}
    for tb_id, lines in blocks:
        code = [line for line in lines if not line.lstrip().startswith("#")]
        shapes.setdefault(tuple(_INT.sub("#", line) for line in code), []).append((tb_id, code))
    classes = []
    for shape, members in shapes.items():
        if len(members) == 1:
            tb_id, _ = members[0]
            classes.append((dict(blocks)[tb_id], [tb_id]))  # comments kept: one block reads as its plan
            continue
        values = [[int(v) for line in code for v in _INT.findall(line)] for _, code in members]
        tables: dict[str, str] = {}  # table expression -> its local, looked up once at the top
        exprs = []
        for column in zip(*values):
            expr = _lookup(list(column), "i")
            if expr.endswith("[i]"):
                expr = tables.setdefault(expr, f"k{len(tables)}")
            exprs.append(expr)
        hoisted = [f"    {name} = {expr}" for expr, name in tables.items()]
        it = iter(exprs)
        body = [_INT.sub(lambda _m: next(it), line) for line in members[0][1]]
        classes.append((hoisted + body, [tb_id for tb_id, _ in members]))
    return classes


def _class_function(c: int, lines: list[str], tbs: list[int], common: str) -> list[str]:
    """The device function of template class ``c``; ``i`` is the calling block's index in its class."""
    ids = str(tbs[0]) if len(tbs) == 1 else f"{', '.join(map(str, tbs[:4]))}{', ...' if len(tbs) > 4 else ''}"
    return ["@cuda.jit(device=True)", f"def tb_class{c}({common}, chunk, tid, nt, g, flag, i):",
            f'    """Plan thread block(s) {ids} ({len(tbs)}); i: the block\'s index among them."""'] + lines


def _combine(acc: str, new: str) -> str:
    return f"{acc} = R.combine_word({acc}, {new}, KIND, OP)"


def _plain_reduce_helper(name: str, k: int, m: int) -> list[str]:
    """``d_j = a_0 (op) a_1 (op) ... a_{k-1}`` for m destinations; each thread owns whole elements, so a
    destination may alias a source."""
    dst = [f"d{j}, e{j}" for j in range(m)]
    src = [f"a{i}, o{i}" for i in range(k)]
    aligned = " | ".join([f"address_of(d{j}, e{j})" for j in range(m)] + [f"address_of(a{i}, o{i})" for i in range(k)])
    out = ["@cuda.jit(device=True)", f"def {name}({', '.join(dst + src)}, n, tid, nt):",
           f'    """{m} destination(s) = {k} sources combined in order, 16 bytes per step when aligned."""',
           "    done = 0",
           f"    if ({aligned}) & _U15 == _Z:",
           "        nv = n // 16",
           "        j = tid",
           "        while j < nv:",
           "            w = j * 16",
           "            x0, x1, x2, x3 = load_v4(a0, o0 + w)"]
    for i in range(1, k):
        out.append(f"            y0, y1, y2, y3 = load_v4(a{i}, o{i} + w)")
        out += ["            " + _combine(f"x{q}", f"y{q}") for q in range(4)]
    out += [f"            store_v4(d{j}, e{j} + w, x0, x1, x2, x3)" for j in range(m)]
    out += ["            j += nt",
            "        done = nv * 16",
            "    j = done // ITEMSIZE + tid",
            "    while j < n // ITEMSIZE:",
            "        w = j * ITEMSIZE",
            "        x = P.gather_word(a0, o0 + w, ITEMSIZE)"]
    out += ["        " + _combine("x", f"P.gather_word(a{i}, o{i} + w, ITEMSIZE)") for i in range(1, k)]
    out += [f"        P.scatter_word(d{j}, e{j} + w, x, ITEMSIZE)" for j in range(m)]
    out.append("        j += nt")
    return out


def _packet_reduce_helper(name: str, k: int, m: int) -> list[str]:
    """``d0 = a0 (op) packets p_1 ... p_{k-1}``; the result also goes out as LL16 packets to m places."""
    dst = ["d0, e0"] + [f"q{j}, f{j}" for j in range(m)]
    src = ["a0, o0"] + [f"p{i}, u{i}" for i in range(1, k)]
    out = ["@cuda.jit(device=True)", f"def {name}({', '.join(dst + src)}, n, tid, nt, flag, wait_context):",
           f'    """d0 = a0 combined with {k - 1} packet source(s), 8 bytes per packet; also sent as packets '
           f'to {m} place(s)."""',
           "    fl = np.uint32(flag)",
           "    j = tid",
           "    while j < (n + 7) // 8:",
           "        w = j * 8",
           "        rem = n - w",
           "        x0 = P.data_word(a0, o0 + w, rem)",
           "        x1 = P.data_word(a0, o0 + w + 4, rem - 4)"]
    for i in range(1, k):
        out += [f"        y0, y1, ok = P.read_packet_ll16(p{i}, u{i} + j * 16, flag, wait_context, OP_PACKET)",
                "        if not ok:", "            return False", "        " + _combine("x0", "y0"),
                "        " + _combine("x1", "y1")]
    out += ["        P.put_pair(d0, e0 + w, x0, x1, rem)"]
    out += [f"        store_v4_volatile(q{j}, f{j} + j * 16, x0, fl, x1, fl)" for j in range(m)]
    out += ["        j += nt", "    return True"]
    return out
