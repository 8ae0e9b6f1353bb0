"""Start torch.distributed from whichever launcher started this process (torchrun, Open MPI's or MPICH's mpirun)."""

from __future__ import annotations

import os
from typing import Callable


def launcher_env() -> None:
    """torchrun's RANK/WORLD_SIZE/LOCAL_RANK/MASTER_*, filled in from Open MPI or PMI when started by mpirun."""
    for ours, theirs in (("RANK", ("OMPI_COMM_WORLD_RANK", "PMI_RANK")),
                         ("WORLD_SIZE", ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE")),
                         ("LOCAL_RANK", ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"))):
        for name in theirs:
            if ours not in os.environ and name in os.environ:
                os.environ[ours] = os.environ[name]
    os.environ.setdefault("LOCAL_RANK", os.environ.get("RANK", "0"))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")


def init(backend: str = "mscclpp") -> int:
    """Fill in the launcher's variables, pick this rank's GPU (ranks beyond the GPU count share them, as under
    CUDA MPS) and initialize the default group on ``backend``; this rank's local index."""
    launcher_env()
    import torch
    import torch.distributed as dist
    import pymscclpp.torch  # noqa: F401 (registers "mscclpp")
    from pymscclpp.runtime.backend import IS_SIM
    local = int(os.environ["LOCAL_RANK"])
    if not IS_SIM:
        torch.cuda.set_device(local % torch.cuda.device_count())
    dist.init_process_group(backend)
    return local


def run_check(check: Callable[[], tuple[bool, str]], name: str) -> int:
    """An example's main: ``init()``, this rank's GPU as torch's default device, ``check()`` (ok, report), the
    report printed as ``name: rank R: report``; the exit status (1 when not ok)."""
    init()
    import torch
    import torch.distributed as dist
    from pymscclpp.runtime.backend import IS_SIM
    if not IS_SIM:
        torch.set_default_device(torch.device("cuda", torch.cuda.current_device()))
    ok, report = check()
    print(f"{name}: rank {dist.get_rank()}: {report}", flush=True)
    dist.destroy_process_group()
    return 0 if ok else 1
