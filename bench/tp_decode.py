"""End to end: a decode step of Llama-70B-shaped decoder layers, tensor parallel, all-reduces by NCCL vs pymscclpp.

``torchrun --nproc-per-node 2 bench/tp_decode.py`` (or ``mpirun -np 2 python bench/tp_decode.py``). Each rank
holds its shard of ``--layers`` layers (hidden 8192, intermediate 28672, 64 query / 8 key-value heads of 128,
bf16, random weights): column-parallel QKV and gate/up, row-parallel output and down projections, so two
all-reduces per layer (Megatron). A decode step of ``batch`` tokens is captured in a CUDA graph twice, once
all-reducing on an NCCL group and once on pymscclpp (the ``mscclpp`` backend, or a Communicator with
``--via comm``), same weights and input; both graphs are replayed alternately and timed with CUDA events.
Rank 0 prints step time per batch, the speedup, and whether the two outputs are bitwise equal (with two
ranks both sum a + b once in fp32 and round to bf16, and every other op is the same kernel on the same data).
"""

from __future__ import annotations

import argparse
import os


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--layers", type=int, default=8, help="decoder layers (80 in Llama-70B: ~69 GB a rank at TP 2)")
    ap.add_argument("--batch", default="1,2,4,8,16,32,64", help="tokens per decode step, comma separated")
    ap.add_argument("--hidden", type=int, default=8192)
    ap.add_argument("--intermediate", type=int, default=28672)
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--iters", type=int, default=20, help="graph replays per timed sample")
    ap.add_argument("--reps", type=int, default=15, help="timed samples per run (median reported)")
    ap.add_argument("--via", choices=("backend", "comm"), default="backend",
                    help="pymscclpp through dist.all_reduce on an mscclpp group, or Communicator.all_reduce")
    return ap.parse_args()


def make_layers(args, tp: int, rank: int, device: str = "cuda") -> list[dict]:
    """This rank's shards of every layer: weights N(0, 1/fan_in) so activations stay O(1)."""
    import torch
    gen = torch.Generator(device=device).manual_seed(1234 + rank)
    q, kv = args.heads * args.head_dim // tp, args.kv_heads * args.head_dim // tp
    ffn = args.intermediate // tp

    def w(rows: int, cols: int) -> torch.Tensor:
        return (torch.randn(rows, cols, generator=gen, device=device) / rows ** 0.5).to(torch.bfloat16)

    ones = torch.ones(args.hidden, device=device, dtype=torch.bfloat16)
    return [{"ln1": ones, "qkv": w(args.hidden, q + 2 * kv), "o": w(q, args.hidden),
             "ln2": ones, "gate_up": w(args.hidden, 2 * ffn), "down": w(ffn, args.hidden)}
            for _ in range(args.layers)]


def rms_norm(x, weight, eps: float = 1e-5):
    import torch
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


def decode_step(x, layers: list[dict], args, tp: int, all_reduce):
    """One decode step of ``x`` [tokens, hidden] through every layer; ``all_reduce(t)`` sums t over ranks in place."""
    import torch.nn.functional as F
    tokens = x.shape[0]
    q, kv, hd = args.heads * args.head_dim // tp, args.kv_heads * args.head_dim // tp, args.head_dim
    for w in layers:
        _, _, v = (rms_norm(x, w["ln1"]) @ w["qkv"]).split([q, kv, kv], dim=-1)
        # attention over the one-token context: softmax of a single score is 1, so each query head gets
        # its key-value group's value (GQA); q and k are still computed, as in a real step
        attn = v.view(tokens, kv // hd, 1, hd).expand(tokens, kv // hd, q // kv, hd).reshape(tokens, q)
        out = attn @ w["o"]
        all_reduce(out)
        x = x + out
        gate, up = (rms_norm(x, w["ln2"]) @ w["gate_up"]).chunk(2, dim=-1)
        down = (F.silu(gate) * up) @ w["down"]
        all_reduce(down)
        x = x + down
    return x


def captured(step, x):
    """A CUDA graph of ``step(x)`` (warmed up on a side stream first, as torch.cuda.graph asks) and its output."""
    import torch
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step(x)
    return graph, out


def main() -> None:
    args = parse_args()
    from pymscclpp.torch.launch import launcher_env
    launcher_env()
    import torch
    import torch.distributed as dist
    import pymscclpp.torch
    from pymscclpp.bench.timing import time_eager

    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")  # the default group: NCCL's all-reduces, barriers
    rank, tp = dist.get_rank(), dist.get_world_size()
    if args.via == "backend":
        ours = dist.new_group(backend="mscclpp")
        ours_reduce = lambda t: dist.all_reduce(t, group=ours)  # noqa: E731
    else:
        comm = pymscclpp.torch.communicator_from_store(dist.distributed_c10d._get_default_store(), rank, tp,
                                                       key="tp_decode/uid")
        ours_reduce = comm.all_reduce
    runs = {"nccl": lambda t: dist.all_reduce(t), "pymscclpp": ours_reduce}
    layers = make_layers(args, tp, rank)
    barrier = lambda: dist.barrier(device_ids=[local_rank])  # noqa: E731
    if rank == 0:
        print(f"# {args.layers} layers, hidden {args.hidden}, intermediate {args.intermediate}, TP {tp}, bf16, "
              f"pymscclpp via {args.via}, {args.iters} replays x {args.reps} samples", flush=True)
        print(f"{'batch':>6} {'nccl_us':>10} {'pymscclpp_us':>13} {'speedup':>8}  outputs")
    failed = False
    for batch in (int(b) for b in args.batch.split(",")):
        gen = torch.Generator(device="cuda").manual_seed(batch)  # the same input on every rank
        x = torch.randn(batch, args.hidden, generator=gen, device="cuda").to(torch.bfloat16)
        graphs = {name: captured(lambda t, ar=ar: decode_step(t, layers, args, tp, ar), x) for name, ar in runs.items()}
        times = {name: [] for name in runs}
        for _ in range(2):  # alternate the runs, twice, and keep each one's best median
            for name, (graph, _) in graphs.items():
                times[name].append(time_eager(graph.replay, args.iters, args.reps, barrier))
        torch.cuda.synchronize()
        a, b = graphs["nccl"][1], graphs["pymscclpp"][1]
        same = torch.equal(a, b)
        failed |= not same
        t_nccl, t_ours = min(times["nccl"]), min(times["pymscclpp"])
        if rank == 0:
            verdict = "equal" if same else f"DIFFER (max abs diff {(a.float() - b.float()).abs().max().item():.3g})"
            print(f"{batch:>6} {t_nccl:>10.1f} {t_ours:>13.1f} {t_nccl / t_ours:>7.3f}x  {verdict}", flush=True)
        del graphs
    dist.destroy_process_group()
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
