"""The torch integration on real GPUs (CUDA tensors), or on the simulator (CPU tensors, no graphs):

    mpirun -np 2 python tests/gpu/run_torch.py        (2 ranks may share one GPU under CUDA MPS)

Runs the simulator tests' rank bodies (every served collective, the verbs, the fallback routing, functional
collectives, torch.compile with inductor, DTensor TP, the engine classes) with CUDA as torch's default device, then CUDA graph
captures of dist.all_reduce, a functional all-reduce and both engine classes, replayed with fresh input.
Set PYMSCCLPP_TORCH_FALLBACK=gloo where NCCL cannot run (two ranks on one GPU). One PASS/FAIL line per case.
"""

from __future__ import annotations

import os
import sys
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from pymscclpp.runtime.backend import IS_SIM  # noqa: E402
from pymscclpp.torch.launch import launcher_env  # noqa: E402
import test_torch_backend as backend_cases  # noqa: E402
import test_torch_engines as engine_cases  # noqa: E402
import test_torch_verbs as verb_cases  # noqa: E402


def _replayed(step, inp: torch.Tensor, replays: int = 5) -> None:
    """``step()`` sums ``inp`` over the ranks and returns the result: run once (warm-up: set-up happens outside
    capture), captured in a CUDA graph on GPUs, replayed with fresh input written before each replay."""
    rank, size = dist.get_rank(), dist.get_world_size()

    def fill(k: int) -> None:
        inp.fill_(float(rank + 1 + k))

    def check(k: int, result: torch.Tensor) -> None:
        want = torch.full_like(inp, float(sum(r + 1 + k for r in range(size))))
        assert torch.equal(result, want), (k, result.flatten()[:4])
    fill(0)
    check(0, step())
    graph = None
    if not IS_SIM:
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = step()
    for k in range(1, replays):
        fill(k)
        if graph is None:
            check(k, step())
        else:
            graph.replay()
            torch.cuda.synchronize()
            check(k, captured)


def _graph_cases(dist, store, rank: int, size: int) -> None:
    """dist.all_reduce, functional all_reduce, SGLang's and vLLM's all-reduce, each captured and replayed."""
    import pymscclpp.torch as pt
    import torch.distributed._functional_collectives as fc
    dist.init_process_group("mscclpp", store=store, rank=rank, world_size=size)
    world, inp = dist.group.WORLD, torch.zeros(4096)
    sglang = pt.PyMscclppCommunicator(world, torch.get_default_device())
    vllm = pt.CustomAllreduce(world, torch.get_default_device())
    with sglang.change_state(enable=True), vllm.capture():
        _replayed(lambda: (dist.all_reduce(inp), inp)[1], inp)
        _replayed(lambda: fc.wait_tensor(fc.all_reduce(inp, "sum", world)), inp)
        _replayed(lambda: sglang.all_reduce(inp.clone()), inp)
        _replayed(lambda: vllm.custom_all_reduce(inp), inp)
    sglang.destroy()
    vllm.close()
    dist.destroy_process_group()


def main() -> int:
    launcher_env()
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if not IS_SIM:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
        torch.set_default_device(torch.device("cuda", torch.cuda.current_device()))
    import pymscclpp.torch  # noqa: F401 (registers "mscclpp")
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), size, is_master=rank == 0)
    cases = [("served collectives", backend_cases._served_collectives),
             ("functional, compile, DTensor", backend_cases._functional_compile_dtensor),
             ("engine classes", engine_cases._engine_shapes), ("graph captures", _graph_cases),
             ("send/recv, batches, uneven all-to-all, reduce, gather, scatter, AVG, subgroup", verb_cases._every_verb)]
    if os.environ.get("PYMSCCLPP_TORCH_FALLBACK", "none" if IS_SIM else "nccl") != "none":
        cases.append(("fallback routing", backend_cases._forwarded_calls))  # last: gloo may refuse CUDA send
    failures = 0
    for name, fn in cases:
        try:
            fn(dist, store, rank, size)
            ok = True
        except Exception:
            ok = False
            traceback.print_exc()
            if dist.is_initialized():
                dist.destroy_process_group()
        failures += not ok
        print(f"rank {rank}: {'PASS' if ok else 'FAIL'} {name}", flush=True)
    print(f"rank {rank}: torch {torch.__version__}: {len(cases)} cases, {failures} failed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
