"""A small MLP split into two pipeline stages (torch.distributed.pipelining's GPipe schedule, 2 ranks) on the
``mscclpp`` backend: activations go forward and gradients back with send/recv. Checked against the same model in
one process: the last stage's output and losses, and every stage's gradients.

    mpirun -np 2 python examples/pipeline_mlp.py [--microbatches 4]      (or torchrun --nproc-per-node 2 ...)

Exit status 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import inspect


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--width", type=int, default=64, help="hidden width")
    ap.add_argument("--layers", type=int, default=4, help="linear layers, split evenly between the two stages")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--tol", type=float, default=1e-5, help="largest |difference| / largest |reference value|")
    return ap.parse_args(argv)


def make_model(args, device):
    """The same seeded MLP on every rank: Linear+ReLU blocks, a Linear head."""
    import torch
    torch.manual_seed(0)
    blocks = []
    for k in range(args.layers):
        blocks.append(torch.nn.Linear(args.width, args.width))
        if k < args.layers - 1:
            blocks.append(torch.nn.ReLU())
    return torch.nn.Sequential(*blocks).to(device)


def make_data(args, device):
    """Seeded inputs and targets of the whole batch."""
    import torch
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(args.batch, args.width, generator=gen, device="cpu")
    return x.to(device), torch.randn(args.batch, args.width, generator=gen, device="cpu").to(device)


def reference(args, device) -> tuple:
    """One process: each microbatch's loss and backward in turn, gradients scaled by 1 / microbatches (GPipe's
    arithmetic); output, losses, model."""
    import torch
    model, (x, y) = make_model(args, device), make_data(args, device)
    outs, losses = [], []
    for xm, ym in zip(x.chunk(args.microbatches), y.chunk(args.microbatches)):
        out = model(xm)
        loss = torch.nn.functional.mse_loss(out, ym)
        (loss / args.microbatches).backward()
        outs.append(out.detach())
        losses.append(loss.detach())
    return torch.cat(outs), torch.stack(losses), model


def close(got, want, tol: float) -> bool:
    """``got`` agrees with ``want`` within ``tol`` times ``want``'s largest magnitude."""
    got, want = got.detach(), want.detach()
    scale = float(want.abs().max()) or 1.0
    return float((got - want).abs().max()) <= tol * scale


def compare(args) -> tuple[bool, str]:
    """Run the two-stage schedule on the default group (2 ranks) and check it; (ok, report) on this rank."""
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe
    rank, size = dist.get_rank(), dist.get_world_size()
    if size != 2:
        raise SystemExit(f"pipeline_mlp: needs 2 ranks, got {size}")
    device = torch.zeros(0).device  # torch's default device: CUDA on GPUs, CPU on the simulator
    model, (x, y) = make_model(args, device), make_data(args, device)
    cut = 2 * (args.layers // 2)  # the first half's Linear+ReLU blocks
    stage_module = model[:cut] if rank == 0 else model[cut:]
    micro = torch.empty(args.batch // args.microbatches, args.width)
    # static shapes (no metadata traded between the stages): activations forward, their gradients back
    grads = {"output_grads": micro} if rank == 0 else {"input_grads": micro}
    known = inspect.signature(PipelineStage.__init__).parameters  # torch before 2.12 takes no gradient shapes
    grads = {k: v for k, v in grads.items() if k in known}
    stage = PipelineStage(stage_module, rank, 2, device, input_args=micro.clone().requires_grad_(rank == 1),
                          output_args=micro, **grads)
    schedule = ScheduleGPipe(stage, args.microbatches, loss_fn=torch.nn.functional.mse_loss)
    losses: list = []
    out = schedule.step(x) if rank == 0 else schedule.step(target=y, losses=losses)
    want_out, want_losses, ref = reference(args, device)
    ref_stage = ref[:cut] if rank == 0 else ref[cut:]
    checks = {f"{name} gradient": close(p.grad, q.grad, args.tol)
              for (name, p), q in zip(stage_module.named_parameters(), ref_stage.parameters())}
    if rank == 1:
        checks["output"] = close(out, want_out, args.tol)
        checks["losses"] = close(torch.stack(losses), want_losses, args.tol)
    bad = [name for name, ok in checks.items() if not ok]
    what = f"stage {rank}: {len(checks)} checks over {args.microbatches} microbatches"
    return not bad, f"{what}: mismatch in {', '.join(bad)}" if bad else f"{what} OK"


def main() -> int:
    args = parse_args()
    from pymscclpp.torch.launch import run_check
    return run_check(lambda: compare(args), "pipeline_mlp")


if __name__ == "__main__":
    raise SystemExit(main())
