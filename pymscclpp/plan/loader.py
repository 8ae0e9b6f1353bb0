"""Load and validate execution plans: JSON text, a path or a parsed dict in, ``model.Plan`` out.

Every field is checked; ``PlanError`` messages start with the JSON path of the bad field, for example
``gpus[1].threadblocks[0].ops[3].dst_buff[0].index: ...``. Plans written by MSCCL++'s own DSL load as they are,
switch (NVLS) channels and their multimem ops included (the interpreter runs them; the executor refuses them).
"""

from __future__ import annotations

import json
import os
from typing import Any

from .model import (BUFFER_CODES, CHANNEL_TYPES, MAX_MESSAGE_SIZE, REDUCE_OPS, SWITCH, BufferRef, Gpu, Op, Plan, PlanError,
                    RemoteBuffer, SwitchChannel, ThreadBlock)
from .protocols import PLAN_SPELLING, protocol_name
from .opcodes import ALL_OPS, CHANNEL_SYNC_OPS, DATA_OPS, PACKET_ROLES, REMOTE_ROLES, SEMAPHORE_OPS, SWITCH_ROLES, roles


def load_plan(source: "str | os.PathLike | dict | Plan") -> Plan:
    """Parse and validate a plan given as JSON text, a file path, a dict, or a ``Plan`` (returned as is)."""
    if isinstance(source, Plan):
        return source
    if isinstance(source, os.PathLike) or (isinstance(source, str) and not source.lstrip().startswith("{")):
        with open(source, encoding="utf-8") as f:
            source = f.read()
    if isinstance(source, str):
        try:
            source = json.loads(source)
        except json.JSONDecodeError as e:
            raise PlanError(f"<plan>: not valid JSON: {e}") from None
    return _Loader().plan(source)


def _fail(path: str, reason: str) -> PlanError:
    return PlanError(f"{path}: {reason}")


def _get(obj: dict, key: str, path: str, kind: type | tuple, default: Any = ...) -> Any:
    """``obj[key]`` checked to be of ``kind`` (bool is not an int); ``default`` when absent if given."""
    if key not in obj:
        if default is ...:
            raise _fail(f"{path}.{key}" if path else key, "missing")
        return default
    value = obj[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise _fail(f"{path}.{key}" if path else key, f"expected {names}, got {type(value).__name__} {value!r}")
    return value


def _nat(obj: dict, key: str, path: str, default: Any = ..., minimum: int = 0) -> int:
    value = _get(obj, key, path, int, default)
    if value < minimum:
        raise _fail(f"{path}.{key}", f"must be >= {minimum}, got {value}")
    return value


def _list(obj: dict, key: str, path: str, default: Any = ...) -> list:
    return _get(obj, key, path, list, default)


def _dict_at(value: Any, path: str) -> dict:
    if not isinstance(value, dict):
        raise _fail(path, f"expected an object, got {type(value).__name__}")
    return value


class _Loader:
    """Builds the dataclasses, validating each field as it goes (two passes: structure, then cross-references)."""

    def plan(self, obj: Any) -> Plan:
        obj = _dict_at(obj, "<plan>")
        protocol = _get(obj, "protocol", "", str)
        if protocol not in PLAN_SPELLING.values():
            raise _fail("protocol", f"must be 'Simple' or 'LL', got {protocol!r}")
        gpus_raw = _list(obj, "gpus", "")
        if not gpus_raw:
            raise _fail("gpus", "a plan needs at least one gpu")
        self.num_ranks = len(gpus_raw)
        gpus = [self.gpu(_dict_at(g, f"gpus[{i}]"), i) for i, g in enumerate(gpus_raw)]
        plan = Plan(
            name=_get(obj, "name", "", str),
            collective=_get(obj, "collective", "", str),
            protocol=protocol_name(protocol),
            inplace=_get(obj, "inplace", "", bool),
            gpus=gpus,
            reuse_resources=_get(obj, "reuse_resources", "", bool, False),
            num_threads_per_block=_nat(obj, "num_threads_per_block", "", 1024, minimum=1),
            use_double_scratch_buffer=_get(obj, "use_double_scratch_buffer", "", bool, False),
            buffer_alignment=_nat(obj, "buffer_alignment", "", 16, minimum=1),
            min_message_size=_nat(obj, "min_message_size", "", 0),
            max_message_size=_nat(obj, "max_message_size", "", MAX_MESSAGE_SIZE),
        )
        if plan.min_message_size > plan.max_message_size:
            raise _fail("min_message_size", f"{plan.min_message_size} exceeds max_message_size {plan.max_message_size}")
        for r, gpu in enumerate(gpus):
            self.cross_check_gpu(plan, gpu, f"gpus[{r}]")
        return plan

    def gpu(self, obj: dict, r: int) -> Gpu:
        path = f"gpus[{r}]"
        if _get(obj, "id", path, int) != r:
            raise _fail(f"{path}.id", f"must equal its position {r}, got {obj['id']}")
        counts = {k: _nat(obj, k, path) for k in ("input_chunks", "output_chunks", "scratch_chunks")}
        channels: dict[str, list[int]] = {}
        switch_channels: list[SwitchChannel] = []
        for i, ch in enumerate(_list(obj, "channels", path, [])):
            cpath = f"{path}.channels[{i}]"
            ch = _dict_at(ch, cpath)
            ctype = self.channel_type(ch, "channel_type", cpath, switch=True)
            if ctype == SWITCH:
                switch_channels.append(self.switch_channel_entry(ch, cpath, r))
                continue
            for j, peer in enumerate(_list(ch, "connected_to", cpath)):
                self.rank_ref(peer, f"{cpath}.connected_to[{j}]", not_self=r)
                channels.setdefault(ctype, []).append(peer)
        remote_buffers = []
        for i, rb in enumerate(_list(obj, "remote_buffers", path, [])):
            bpath = f"{path}.remote_buffers[{i}]"
            rb = _dict_at(rb, bpath)
            rank = self.rank_ref(_get(rb, "rank", bpath, int), f"{bpath}.rank", not_self=r)
            access = _list(rb, "access_channel_types", bpath)
            for j, t in enumerate(access):
                if t not in CHANNEL_TYPES:
                    raise _fail(f"{bpath}.access_channel_types[{j}]", f"must be one of {CHANNEL_TYPES}, got {t!r}")
            remote_buffers.append(RemoteBuffer(rank, self.buffer_code(rb, "type", bpath), list(access)))
        semaphores = [
            _nat(_dict_at(s, f"{path}.semaphores[{i}]"), "init_value", f"{path}.semaphores[{i}]")
            for i, s in enumerate(_list(obj, "semaphores", path, []))
        ]
        tbs = [self.threadblock(_dict_at(tb, f"{path}.threadblocks[{j}]"), f"{path}.threadblocks[{j}]", j)
               for j, tb in enumerate(_list(obj, "threadblocks", path))]
        return Gpu(r, counts["input_chunks"], counts["output_chunks"], counts["scratch_chunks"], tbs, channels,
                   remote_buffers, semaphores, switch_channels)

    def switch_channel_entry(self, obj: dict, path: str, r: int) -> SwitchChannel:
        """A gpu's switch channel: one buffer type and one group of distinct ranks that includes this gpu."""
        buffer_type = self.buffer_code(obj, "buffer_type", path)
        groups = _list(obj, "rank_groups", path)
        if len(groups) != 1:
            raise _fail(f"{path}.rank_groups", f"a switch channel needs exactly one rank group, got {len(groups)}")
        gpath = f"{path}.rank_groups[0]"
        group = _dict_at(groups[0], gpath)
        ranks = [self.rank_ref(v, f"{gpath}.ranks[{k}]", not_self=-1) for k, v in enumerate(_list(group, "ranks", gpath))]
        if _nat(group, "size", gpath) != len(ranks) or len(set(ranks)) != len(ranks):
            raise _fail(f"{gpath}", f"size {group['size']} must count the distinct ranks {ranks}")
        if r not in ranks:
            raise _fail(f"{gpath}.ranks", f"rank {r} has a switch channel whose group {ranks} does not include it")
        return SwitchChannel(buffer_type, ranks)

    def threadblock(self, obj: dict, path: str, j: int) -> ThreadBlock:
        if _get(obj, "id", path, int) != j:
            raise _fail(f"{path}.id", f"must equal its position {j}, got {obj['id']}")
        channels: dict[str, list[int]] = {}
        for i, ch in enumerate(_list(obj, "channels", path, [])):
            cpath = f"{path}.channels[{i}]"
            ch = _dict_at(ch, cpath)
            ctype = self.channel_type(ch, "channel_type", cpath, switch=True)
            channels.setdefault(ctype, []).extend(self.nat_item(cid, f"{cpath}.channel_ids[{k}]")
                                                  for k, cid in enumerate(_list(ch, "channel_ids", cpath)))
        refs: dict[str, list[int]] = {}
        for i, ref in enumerate(_list(obj, "remote_buffer_refs", path, [])):
            rpath = f"{path}.remote_buffer_refs[{i}]"
            ref = _dict_at(ref, rpath)
            ctype = self.channel_type(ref, "access_channel_type", rpath)
            refs.setdefault(ctype, []).extend(self.nat_item(bid, f"{rpath}.remote_buffer_ids[{k}]")
                                              for k, bid in enumerate(_list(ref, "remote_buffer_ids", rpath)))
        ops = [self.op(_dict_at(op, f"{path}.ops[{i}]"), f"{path}.ops[{i}]", nested=False)
               for i, op in enumerate(_list(obj, "ops", path))]
        return ThreadBlock(j, ops, channels, refs)

    def op(self, obj: dict, path: str, nested: bool) -> Op:
        name = _get(obj, "name", path, str)
        if name not in ALL_OPS:
            raise _fail(f"{path}.name", f"unknown op {name!r}")
        if name == "glre":
            obj = self.glre_as_data_op(obj, path)
        op = Op(name, buffer_type=obj.get("buffer_type"))
        if "channel_type" in obj:
            op.channel_type = self.channel_type(obj, "channel_type", path, switch=True)
        op.channel_ids = [self.nat_item(v, f"{path}.channel_ids[{i}]") for i, v in enumerate(_list(obj, "channel_ids", path, []))]
        op.src_buff = [self.buffer_ref(b, f"{path}.src_buff[{i}]") for i, b in enumerate(_list(obj, "src_buff", path, []))]
        op.dst_buff = [self.buffer_ref(b, f"{path}.dst_buff[{i}]") for i, b in enumerate(_list(obj, "dst_buff", path, []))]
        if "reduce_op" in obj:
            op.reduce_op = _get(obj, "reduce_op", path, str)
            if op.reduce_op not in REDUCE_OPS:
                raise _fail(f"{path}.reduce_op", f"must be one of {REDUCE_OPS}, got {op.reduce_op!r}")
        if "tbg_info" in obj:
            tpath = f"{path}.tbg_info"
            tbg = _dict_at(obj["tbg_info"], tpath)
            size = _nat(tbg, "tbg_size", tpath, minimum=1)
            tb_id = _nat(tbg, "tb_id", tpath)
            if tb_id >= size:
                raise _fail(f"{tpath}.tb_id", f"{tb_id} is not below tbg_size {size}")
            op.tbg = (tb_id, size)
        if name == "barrier":
            op.barrier_id = _nat(obj, "barrier_id", path)
            op.num_threadblocks = _nat(obj, "num_threadblocks", path, minimum=1)
        if name in SEMAPHORE_OPS:
            op.semaphore_ids = [self.nat_item(v, f"{path}.semaphore_ids[{i}]")
                                for i, v in enumerate(_list(obj, "semaphore_ids", path))]
            if not op.semaphore_ids:
                raise _fail(f"{path}.semaphore_ids", "needs at least one semaphore")
        if name == "pipeline":
            if nested:
                raise _fail(f"{path}.name", "a pipeline cannot be nested in another pipeline")
            ipath = f"{path}.iter_context"
            ctx = _dict_at(_get(obj, "iter_context", path, dict), ipath)
            op.iter_context = (_nat(ctx, "unit_size", ipath, minimum=1), _nat(ctx, "num_chunks", ipath, minimum=1))
            op.ops = [self.op(_dict_at(o, f"{path}.ops[{i}]"), f"{path}.ops[{i}]", nested=True)
                      for i, o in enumerate(_list(obj, "ops", path))]
        return op

    def glre_as_data_op(self, obj: dict, path: str) -> dict:
        """MSCCL++'s unfused ``glre`` (buffer_type/buffer_offset/size/dst_chunk) as src_buff/dst_buff like other ops."""
        ids = _list(obj, "channel_ids", path)
        if len(ids) != 1:
            raise _fail(f"{path}.channel_ids", f"glre names exactly one switch channel, got {ids!r}")
        self.buffer_code(obj, "buffer_type", path)
        src = {"switch_channel_id": ids[0], "index": _nat(obj, "buffer_offset", path), "size": _nat(obj, "size", path)}
        dst = _dict_at(_get(obj, "dst_chunk", path, dict), f"{path}.dst_chunk")
        return {**obj, "src_buff": [src], "dst_buff": [dst], "channel_ids": []}

    def buffer_ref(self, obj: Any, path: str) -> BufferRef:
        obj = _dict_at(obj, path)
        ref = BufferRef(index=_nat(obj, "index", path), size=_nat(obj, "size", path, minimum=1))
        if "rank" in obj:
            ref.rank = self.rank_ref(obj["rank"], f"{path}.rank", not_self=-1)
        if "switch_channel_id" in obj:
            ref.switch_channel_id = _nat(obj, "switch_channel_id", path)
        elif "buffer_id" in obj:
            ref.buffer_id = _nat(obj, "buffer_id", path)
        elif "type" in obj:
            ref.type = self.buffer_code(obj, "type", path)
        else:
            raise _fail(path, "needs 'type' (a local buffer) or 'buffer_id' (a remote buffer)")
        return ref

    def channel_type(self, obj: dict, key: str, path: str, switch: bool = False) -> str:
        """A channel type; ``switch`` only where the plan format allows one (not for remote buffer access)."""
        value = _get(obj, key, path, str)
        allowed = CHANNEL_TYPES + (SWITCH,) if switch else CHANNEL_TYPES
        if value not in allowed:
            raise _fail(f"{path}.{key}", f"must be one of {allowed}, got {value!r}")
        return value

    @staticmethod
    def buffer_code(obj: dict, key: str, path: str) -> str:
        value = _get(obj, key, path, str)
        if value not in BUFFER_CODES:
            raise _fail(f"{path}.{key}", f"must be one of {BUFFER_CODES}, got {value!r}")
        return value

    @staticmethod
    def nat_item(value: Any, path: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _fail(path, f"expected a non-negative integer, got {value!r}")
        return value

    def rank_ref(self, value: Any, path: str, not_self: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < self.num_ranks:
            raise _fail(path, f"expected a rank in [0, {self.num_ranks}), got {value!r}")
        if value == not_self:
            raise _fail(path, f"rank {value} cannot connect to itself")
        return value

    # -- second pass: references between gpus, thread blocks and ops ------------------------------

    def cross_check_gpu(self, plan: Plan, gpu: Gpu, path: str) -> None:
        for i, rb in enumerate(gpu.remote_buffers):
            for t in rb.access_channel_types:
                if rb.rank not in gpu.channels.get(t, []):
                    raise _fail(f"{path}.remote_buffers[{i}]",
                                f"reached through a {t} channel, but rank {gpu.id} has no {t} channel to rank {rb.rank}")
        for tb in gpu.threadblocks:
            tpath = f"{path}.threadblocks[{tb.id}]"
            for t, ids in tb.channels.items():
                for k, cid in enumerate(ids):
                    if cid >= (len(gpu.switch_channels) if t == SWITCH else len(gpu.channels.get(t, []))):
                        raise _fail(f"{tpath}.channels", f"{t} channel {cid} (entry {k}) does not exist on rank {gpu.id}")
            for t, ids in tb.remote_buffer_refs.items():
                for k, bid in enumerate(ids):
                    if bid >= len(gpu.remote_buffers):
                        raise _fail(f"{tpath}.remote_buffer_refs", f"remote buffer {bid} (entry {k}) does not exist")
                    if t not in gpu.remote_buffers[bid].access_channel_types:
                        raise _fail(f"{tpath}.remote_buffer_refs", f"remote buffer {bid} is not accessible through {t} channels")
            for i, op in enumerate(tb.ops):
                self.cross_check_op(plan, gpu, tb, op, f"{tpath}.ops[{i}]")
                for j, inner in enumerate(op.ops):
                    self.cross_check_op(plan, gpu, tb, inner, f"{tpath}.ops[{i}].ops[{j}]")

    def cross_check_op(self, plan: Plan, gpu: Gpu, tb: ThreadBlock, op: Op, path: str) -> None:
        if op.name in CHANNEL_SYNC_OPS:
            allowed = ("port",) if op.name == "flush" else CHANNEL_TYPES
            if op.channel_type not in allowed:
                raise _fail(f"{path}.channel_type", f"{op.name} needs channel_type in {allowed}, got {op.channel_type!r}")
            self.check_channel_ids(tb, op, path, required=True)
            if len(set(op.channel_ids)) != len(op.channel_ids):
                raise _fail(f"{path}.channel_ids", f"repeats a channel: {op.channel_ids}")
        elif op.name == "barrier":
            if op.num_threadblocks > len(gpu.threadblocks):
                raise _fail(f"{path}.num_threadblocks", f"{op.num_threadblocks} exceeds the {len(gpu.threadblocks)} thread blocks of rank {gpu.id}")
        elif op.name in SEMAPHORE_OPS:
            for k, sid in enumerate(op.semaphore_ids):
                if sid >= len(gpu.semaphores):
                    raise _fail(f"{path}.semaphore_ids[{k}]", f"semaphore {sid} does not exist on rank {gpu.id}")
        elif op.name in DATA_OPS:
            self.cross_check_data_op(plan, gpu, tb, op, path)

    def check_channel_ids(self, tb: ThreadBlock, op: Op, path: str, required: bool) -> None:
        if required and not op.channel_ids:
            raise _fail(f"{path}.channel_ids", f"{op.name} needs at least one channel")
        available = len(tb.channels.get(op.channel_type, []))
        for k, cid in enumerate(op.channel_ids):
            if cid >= available:
                raise _fail(f"{path}.channel_ids[{k}]",
                            f"thread block {tb.id} has {available} {op.channel_type} channels, no channel {cid}")

    def cross_check_data_op(self, plan: Plan, gpu: Gpu, tb: ThreadBlock, op: Op, path: str) -> None:
        shape = DATA_OPS[op.name]
        for side, head, rest, refs in (("src_buff", shape.src_head, shape.src_rest, op.src_buff),
                                       ("dst_buff", shape.dst_head, shape.dst_rest, op.dst_buff)):
            if len(refs) < len(head) or (rest is None and len(refs) != len(head)):
                want = f"{len(head)}" if rest is None else f"at least {len(head)}"
                raise _fail(f"{path}.{side}", f"{op.name} takes {want} buffers, got {len(refs)}")
        if shape.paired and (len(op.src_buff) != len(op.dst_buff) or not op.src_buff):
            raise _fail(f"{path}.dst_buff", f"{op.name} needs as many dst as src buffers (>= 1), got {len(op.src_buff)} and {len(op.dst_buff)}")
        src_roles, dst_roles = roles(op.name, len(op.src_buff), len(op.dst_buff))
        if any(r in REMOTE_ROLES or r in SWITCH_ROLES for r in src_roles + dst_roles):
            if op.channel_type not in shape.channel_types:
                raise _fail(f"{path}.channel_type",
                            f"{op.name} with remote buffers needs channel_type in {sorted(shape.channel_types)}, got {op.channel_type!r}")
        remote_dsts = [i for i, r in enumerate(dst_roles) if r in REMOTE_ROLES]
        if op.channel_type == "port" and op.name in ("put", "pws", "pwsf", "ppkt", "rppkt"):
            if len(op.channel_ids) != len(remote_dsts):
                raise _fail(f"{path}.channel_ids", f"a port {op.name} needs one channel per remote dst ({len(remote_dsts)}), got {len(op.channel_ids)}")
        if op.channel_ids:
            self.check_channel_ids(tb, op, path, required=False)
        for side, refs, rls in (("src_buff", op.src_buff, src_roles), ("dst_buff", op.dst_buff, dst_roles)):
            for k, (ref, role) in enumerate(zip(refs, rls)):
                self.check_ref(plan, gpu, tb, op, ref, role, f"{path}.{side}[{k}]")
        if op.channel_type == "port" and op.channel_ids:
            for k, (i, cid) in enumerate(zip(remote_dsts, op.channel_ids)):
                peer = gpu.channels["port"][tb.channels["port"][cid]]
                target = plan.remote_buffer(gpu.id, tb.id, "port", op.dst_buff[i].buffer_id).rank
                if peer != target:
                    raise _fail(f"{path}.channel_ids[{k}]", f"port channel {cid} leads to rank {peer}, but dst_buff[{i}] is on rank {target}")
        sizes = {ref.size for ref in op.src_buff + op.dst_buff}
        if shape.paired:
            for k, (s, d) in enumerate(zip(op.src_buff, op.dst_buff)):
                if s.size != d.size:
                    raise _fail(f"{path}.dst_buff[{k}].size", f"{d.size} differs from src_buff[{k}].size {s.size}")
        elif len(sizes) > 1:
            raise _fail(f"{path}", f"{op.name} needs equal sizes for all buffers, got {sorted(sizes)}")

    def check_ref(self, plan: Plan, gpu: Gpu, tb: ThreadBlock, op: Op, ref: BufferRef, role: str, path: str) -> None:
        if role in SWITCH_ROLES:
            self.check_switch_ref(plan, gpu, tb, op, ref, role, path)
            return
        if ref.switch:
            raise _fail(path, f"{op.name} expects a {'remote' if role in REMOTE_ROLES else 'local'} buffer here, "
                              f"got switch_channel_id {ref.switch_channel_id}")
        if role in REMOTE_ROLES:
            if not ref.remote:
                raise _fail(path, f"{op.name} expects a remote buffer here ('buffer_id'), got local type {ref.type!r}")
            refs = tb.remote_buffer_refs.get(op.channel_type, [])
            if ref.buffer_id >= len(refs):
                raise _fail(f"{path}.buffer_id", f"thread block {tb.id} has {len(refs)} {op.channel_type} remote buffers, no buffer {ref.buffer_id}")
            rb = plan.remote_buffer(gpu.id, tb.id, op.channel_type, ref.buffer_id)
            owner, code = plan.gpus[rb.rank], rb.type
        else:
            if ref.remote:
                raise _fail(path, f"{op.name} expects a local buffer here ('type'), got buffer_id {ref.buffer_id}")
            if ref.rank not in (None, gpu.id):
                raise _fail(f"{path}.rank", f"a local buffer of rank {gpu.id} cannot be on rank {ref.rank}")
            owner, code = gpu, ref.type
        if role in PACKET_ROLES and code != "s":
            raise _fail(path, f"{op.name} keeps packets here, which must be in the scratch buffer, not {code!r}")
        limit = owner.chunks(code)
        if ref.index + ref.size > limit:
            raise _fail(f"{path}.index", f"chunks [{ref.index}, {ref.index + ref.size}) exceed the {limit} "
                                         f"'{code}' chunks of rank {owner.id}")

    def check_switch_ref(self, plan: Plan, gpu: Gpu, tb: ThreadBlock, op: Op, ref: BufferRef, role: str, path: str) -> None:
        """A switch ref: a switch channel of the thread block, and a range that every group rank's buffer holds."""
        if not ref.switch:
            raise _fail(path, f"{op.name} expects a switch channel's buffer here ('switch_channel_id')")
        available = len(tb.channels.get(SWITCH, []))
        if ref.switch_channel_id >= available:
            raise _fail(f"{path}.switch_channel_id", f"thread block {tb.id} has {available} switch channels, "
                                                     f"no channel {ref.switch_channel_id}")
        sc = plan.switch_channel(gpu.id, tb.id, ref.switch_channel_id)
        if op.buffer_type is not None and op.buffer_type != sc.buffer_type:
            raise _fail(f"{path}", f"{op.name} names buffer_type {op.buffer_type!r}, but its switch channel is over "
                                   f"{sc.buffer_type!r} buffers")
        if role in PACKET_ROLES and sc.buffer_type != "s":
            raise _fail(path, f"{op.name} keeps packets here, which must be in the scratch buffer, not {sc.buffer_type!r}")
        for rank in sc.ranks:
            limit = plan.gpus[rank].chunks(sc.buffer_type)
            if ref.index + ref.size > limit:
                raise _fail(f"{path}.index", f"chunks [{ref.index}, {ref.index + ref.size}) exceed the {limit} "
                                             f"'{sc.buffer_type}' chunks of rank {rank} in the switch channel's group")
