"""Lower compiled IR to the MSCCL++ execution-plan JSON: per-thread-block channel and remote-buffer tables."""

from __future__ import annotations

from typing import Any

from ...plan.opcodes import DATA_OPS
from .ir import IrOp, Ref
from .types import ChannelType


class _GpuTables:
    """Numbering of the remote buffers of one gpu, and of each thread block's channels and buffer refs."""

    def __init__(self, remote_order: list[tuple[int, str]]) -> None:
        self.remote: dict[tuple[int, str], int] = {key: i for i, key in enumerate(remote_order)}
        self.remote_access: list[list[str]] = [[] for _ in remote_order]

    def remote_id(self, ref: Ref, access: str) -> int:
        key = (ref.rank, ref.buffer.value)
        if key not in self.remote:
            self.remote[key] = len(self.remote_access)
            self.remote_access.append([])
        rid = self.remote[key]
        if access not in self.remote_access[rid]:
            self.remote_access[rid].append(access)
        return rid

    def remote_buffers(self) -> list[dict]:
        return [{"rank": rank, "type": code, "access_channel_types": self.remote_access[rid]}
                for (rank, code), rid in sorted(self.remote.items(), key=lambda kv: kv[1])]


class _TbTables:
    """Channels and remote buffers one thread block uses, numbered in first-use order per channel type."""

    def __init__(self, gpu: _GpuTables) -> None:
        self.gpu = gpu
        self.channels: dict[str, list[int]] = {}
        self.refs: dict[str, list[int]] = {}

    def channel(self, ctype: str, gpu_channel: int) -> int:
        ids = self.channels.setdefault(ctype, [])
        if gpu_channel not in ids:
            ids.append(gpu_channel)
        return ids.index(gpu_channel)

    def buffer(self, ref: Ref, ctype: str | None, switch_id: int | None = None) -> dict:
        if ref.group:
            return {"switch_channel_id": switch_id, "index": ref.index, "size": ref.size}
        if ctype == "switch":  # MSCCL++ names the rank of a switch op's local chunk
            return {"rank": ref.rank, "type": ref.buffer.value, "index": ref.index, "size": ref.size}
        if not ref.remote:
            return {"type": ref.buffer.value, "index": ref.index, "size": ref.size}
        rid = self.gpu.remote_id(ref, ctype)
        ids = self.refs.setdefault(ctype, [])
        if rid not in ids:
            ids.append(rid)
        return {"buffer_id": ids.index(rid), "index": ref.index, "size": ref.size}

    def op(self, op: IrOp) -> dict[str, Any]:
        out: dict[str, Any] = {"name": op.name}
        ctype = op.channel_type.value if op.channel_type not in (None, ChannelType.none) else None
        local_ids = [self.channel(ctype, c) for c in op.channels] if ctype else []
        if op.name == "glre":  # MSCCL++'s shape for an unfused multimem load-reduce
            src, dst = op.src[0], op.dst[0]
            return {"name": "glre", "buffer_type": src.buffer.value, "buffer_offset": src.index, "size": src.size,
                    "dst_chunk": self.buffer(dst, ctype), "channel_ids": local_ids, "channel_type": ctype,
                    "reduce_op": op.reduce_op.value}
        if ctype == "switch":
            out["src_buff"] = [self.buffer(r, ctype, local_ids[0]) for r in op.src]
            out["dst_buff"] = [self.buffer(r, ctype, local_ids[0]) for r in op.dst]
            out["channel_type"] = ctype
            if DATA_OPS[op.name].reduces:
                out["reduce_op"] = op.reduce_op.value
            return out
        if op.name in DATA_OPS:
            out["src_buff"] = [self.buffer(r, ctype) for r in op.src]
            out["dst_buff"] = [self.buffer(r, ctype) for r in op.dst]
            if ctype == "port" or op.name == "get":  # as MSCCL++ writes them
                out["channel_ids"] = local_ids
            if ctype:
                out["channel_type"] = ctype
            if DATA_OPS[op.name].reduces:
                out["reduce_op"] = op.reduce_op.value
            if op.tbg is not None:
                out["tbg_info"] = {"tb_id": op.tbg[0], "tbg_size": op.tbg[1]}
        elif ctype:
            out["channel_ids"] = local_ids
            out["channel_type"] = ctype
        elif op.name == "barrier":
            out["barrier_id"], out["num_threadblocks"] = op.barrier
        elif op.semaphores:
            out["semaphore_ids"] = list(op.semaphores)
        elif op.name == "pipeline":
            out["iter_context"] = {"unit_size": op.loop.unit, "num_chunks": op.loop.num_chunks}
            out["ops"] = [self.op(inner) for inner in op.ops]
        return out


def emit_gpu(rank: int, counts: tuple[int, int, int], tbs: dict[int, list[IrOp]],
             channels: dict[ChannelType, list[int]], switch_channels: list[tuple], semaphores: list[int],
             remote_order: list[tuple[int, str]]) -> dict:
    """The plan's ``gpus[rank]`` entry; thread blocks numbered 0..max, missing ones left empty."""
    tables = _GpuTables(remote_order)  # remote buffers numbered in the order the program first named them
    threadblocks = []
    for tb in range(max(tbs, default=-1) + 1):
        tt = _TbTables(tables)
        ops = [tt.op(op) for op in tbs.get(tb, [])]
        threadblocks.append({
            "id": tb,
            "ops": ops,
            "channels": [{"channel_type": t, "channel_ids": ids} for t, ids in tt.channels.items()],
            "remote_buffer_refs": [{"access_channel_type": t, "remote_buffer_ids": ids} for t, ids in tt.refs.items()],
        })
    return {
        "id": rank,
        "input_chunks": counts[0],
        "output_chunks": counts[1],
        "scratch_chunks": counts[2],
        "threadblocks": threadblocks,
        "channels": [{"channel_type": t.value, "connected_to": peers} for t, peers in channels.items() if peers]
        + [{"channel_type": "switch", "buffer_type": bt.value, "rank_groups": [{"size": len(ranks), "ranks": ranks}]}
           for bt, ranks in switch_channels],
        "remote_buffers": tables.remote_buffers(),
        "semaphores": [{"init_value": v} for v in semaphores],
    }
