"""A torchrun job on the "mscclpp" backend that loses a rank once: on the first attempt rank 1 kills itself
(SIGKILL) in the middle of its all-reduces; torchrun (--max-restarts=1) restarts the job, which then finishes.
Each rank of the attempt that finishes writes its checked sums to OUTDIR/rank<r>.json."""

from __future__ import annotations

import json
import os
import signal
import sys

import torch
import torch.distributed as dist

import pymscclpp.torch  # noqa: F401 (registers the backend)

ITERS = 6


def main(out_dir: str) -> None:
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    dist.init_process_group("mscclpp")
    sums = []
    for i in range(ITERS):
        if attempt == 0 and rank == 1 and i == ITERS // 2:
            os.kill(os.getpid(), signal.SIGKILL)
        x = torch.full((64,), float(rank + i))
        dist.all_reduce(x)
        want = float(sum(r + i for r in range(size)))
        assert torch.equal(x, torch.full((64,), want)), (i, x[:4], want)
        sums.append(want)
    dist.destroy_process_group()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"attempt": attempt, "sums": sums}, f)


if __name__ == "__main__":
    main(sys.argv[1])
