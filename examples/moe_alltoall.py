"""A small top-2 mixture-of-experts layer with expert parallelism on the ``mscclpp`` backend: every rank routes its
own tokens, dispatches each to the ranks holding its two experts and combines the answers, both with uneven
``all_to_all_single`` (split sizes from the routing). Checked against the same layer in one process.

    mpirun -np 2 python examples/moe_alltoall.py [--tokens 64]        (or torchrun --nproc-per-node N ...)

Exit status 1 on any mismatch.
"""

from __future__ import annotations

import argparse


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=64, help="tokens per rank")
    ap.add_argument("--model", type=int, default=32, help="model width")
    ap.add_argument("--hidden", type=int, default=64, help="experts' hidden width")
    ap.add_argument("--experts-per-rank", type=int, default=2)
    ap.add_argument("--tol", type=float, default=1e-5, help="largest |difference| / largest |reference value|")
    return ap.parse_args(argv)


def make_layer(args, experts: int, device):
    """The same seeded router and experts on every rank (each rank runs only its own experts)."""
    import torch
    torch.manual_seed(0)
    router = torch.nn.Linear(args.model, experts, bias=False)
    ffns = [torch.nn.Sequential(torch.nn.Linear(args.model, args.hidden), torch.nn.GELU(),
                                torch.nn.Linear(args.hidden, args.model)) for _ in range(experts)]
    return router.to(device), torch.nn.ModuleList(ffns).to(device)


def make_tokens(args, rank: int, device):
    """Rank ``rank``'s seeded tokens."""
    import torch
    gen = torch.Generator().manual_seed(100 + rank)
    return torch.randn(args.tokens, args.model, generator=gen, device="cpu").to(device)


def route(router, x):
    """Top-2 routing: (expert ids, gate weights), both [tokens, 2]; the weights softmaxed over the two."""
    import torch
    top, ids = router(x).topk(2, dim=-1)
    return ids, torch.softmax(top, dim=-1)


def reference(router, ffns, x):
    """The layer in one process: each token's two experts' outputs, weighted."""
    import torch
    ids, gates = route(router, x)
    out = torch.zeros_like(x)
    for k in range(2):
        for e, ffn in enumerate(ffns):
            rows = ids[:, k] == e
            out[rows] += gates[rows, k, None] * ffn(x[rows])
    return out


def expert_parallel(router, ffns, x, per_rank: int):
    """The layer with rank r holding experts ``r * per_rank ...``: dispatch, local experts, combine; and the rows
    this rank sent each rank."""
    import torch
    import torch.distributed as dist
    rank, size = dist.get_rank(), dist.get_world_size()
    ids, gates = route(router, x)
    flat = ids.reshape(-1)  # token t's k-th choice at 2t + k
    order = flat.argsort(stable=True)  # by expert, so by the rank holding it
    per_expert = torch.bincount(flat, minlength=size * per_rank).to(torch.int32)
    got_per_expert = torch.empty_like(per_expert)  # [source rank, my expert]: rows each rank sends me
    dist.all_to_all_single(got_per_expert, per_expert)
    send_rows = per_expert.view(size, per_rank).sum(1).tolist()
    recv_rows = got_per_expert.view(size, per_rank).sum(1).tolist()
    received = x.new_empty(sum(recv_rows), x.shape[1])
    dist.all_to_all_single(received, x[order // 2], recv_rows, send_rows)  # dispatch
    local = torch.arange(per_rank, device=x.device).repeat(size).repeat_interleave(got_per_expert.long())
    answers = torch.empty_like(received)
    for e in range(per_rank):
        rows = local == e
        answers[rows] = ffns[rank * per_rank + e](received[rows])
    returned = x.new_empty(order.numel(), x.shape[1])
    dist.all_to_all_single(returned, answers, send_rows, recv_rows)  # combine
    weighted = returned * gates.reshape(-1)[order, None]
    return torch.zeros_like(x).index_add_(0, order // 2, weighted), send_rows


def compare(args) -> tuple[bool, str]:
    """Run the layer over the default group and check this rank's tokens; (ok, report) on this rank."""
    import torch
    import torch.distributed as dist
    rank, size = dist.get_rank(), dist.get_world_size()
    device = torch.zeros(0).device  # torch's default device: CUDA on GPUs, CPU on the simulator
    router, ffns = make_layer(args, size * args.experts_per_rank, device)
    x = make_tokens(args, rank, device)
    with torch.no_grad():
        got, sent = expert_parallel(router, ffns, x, args.experts_per_rank)
        want = reference(router, ffns, x)
    error = float((got - want).abs().max()) / (float(want.abs().max()) or 1.0)
    report = f"{args.tokens} tokens, rows sent per rank {sent}, max relative error {error:.2e}"
    return error <= args.tol, report + (" OK" if error <= args.tol else f" above {args.tol}: mismatch")


def main() -> int:
    args = parse_args()
    from pymscclpp.torch.launch import run_check
    return run_check(lambda: compare(args), "moe_alltoall")


if __name__ == "__main__":
    raise SystemExit(main())
