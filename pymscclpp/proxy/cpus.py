"""Where the proxy threads run: off the cores the launching (main) thread is bound to, near the GPU.

``mpirun`` binds each rank to one core by default (Open MPI: ``--bind-to core`` for up to 2 ranks),
and threads inherit the binding. A proxy thread that spins on the same core as a main thread
spinning in ``cuCtxSynchronize`` (or in an MPI barrier) gets the core only part of the time, in
scheduler slices of milliseconds: every trigger that arrives while it is descheduled waits for the
rest of the slice. So, like MSCCL++ (which binds its proxy to the GPU's NUMA node), each proxy
thread moves to the CPUs of the GPU's NUMA node minus those of the process's binding.

``PYMSCCLPP_PROXY_CPUS``: ``auto`` (the default on GPUs), ``inherit`` (leave the binding alone,
the default on the simulator) or a CPU list such as ``8-15,40``.
"""

from __future__ import annotations

import ctypes
import os

from .. import config
from .._log import get_logger
from ..errors import InvalidUsageError

CPUS_ENV = "PYMSCCLPP_PROXY_CPUS"
_PR_SET_TIMERSLACK = 29
_log = get_logger("proxy")


def parse_cpulist(text: str) -> set[int]:
    """``"0-3,8,10-11"`` -> {0, 1, 2, 3, 8, 10, 11}; ValueError on anything else."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        first, last = int(lo), int(hi) if hi else int(lo)
        if first < 0 or last < first:
            raise ValueError(f"bad CPU range {part!r}")
        cpus.update(range(first, last + 1))
    return cpus


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def online_cpus() -> set[int]:
    text = _read("/sys/devices/system/cpu/online")
    try:
        return parse_cpulist(text) if text else set(range(os.cpu_count() or 1))
    except ValueError:
        return set(range(os.cpu_count() or 1))


def numa_cpus(device: int) -> set[int]:
    """The CPUs of the NUMA node of CUDA device ``device`` (empty when unknown)."""
    try:
        from numba import cuda
        dev = cuda.gpus[device]
        bus = f"{dev.PCI_DOMAIN_ID:04x}:{dev.PCI_BUS_ID:02x}:{dev.PCI_DEVICE_ID:02x}.0"
    except Exception:
        return set()
    node = _read(f"/sys/bus/pci/devices/{bus}/numa_node")
    if node is None or not node.lstrip("-").isdigit() or int(node) < 0:
        return set()
    text = _read(f"/sys/devices/system/node/node{int(node)}/cpulist")
    try:
        return parse_cpulist(text) if text else set()
    except ValueError:
        return set()


def choose(bound: set[int], online: set[int], local: set[int]) -> set[int] | None:
    """The CPUs for a proxy thread of a process bound to ``bound``; None: leave the binding alone.

    A process bound to a few CPUs (fewer than 4: one core and its hyperthread): NUMA-local CPUs
    outside the binding, else any online CPU outside it. An unbound process (binding = every online
    CPU) is only narrowed to the NUMA node; a wider binding is left alone."""
    if not bound or bound >= online:
        narrowed = local & online
        return narrowed if narrowed and narrowed != bound else None
    if len(bound) >= 4:
        return None
    for pool in (local & online, online):
        free = pool - bound
        if free:
            return free
    return None


def place_thread(device: int, default: str = "auto") -> set[int] | None:
    """Move the calling thread per PYMSCCLPP_PROXY_CPUS; the CPU set it runs on (None if unchanged).
    Also lowers its timer slack to 1 us, so that the idle proxy's short sleeps stay short."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_TIMERSLACK, ctypes.c_ulong(1000), ctypes.c_ulong(0), ctypes.c_ulong(0),
                   ctypes.c_ulong(0))
    except Exception:
        pass
    try:
        raw = config.get(CPUS_ENV) or default
    except InvalidUsageError as exc:  # in the proxy thread: warn and run on, as for CPUs that do not exist
        _log.warning("%s; the proxy keeps the process's CPU binding", exc)
        return None
    if raw == "inherit" or not hasattr(os, "sched_setaffinity"):
        return None
    try:
        bound = os.sched_getaffinity(0)
        want = choose(bound, online_cpus(), numa_cpus(device)) if raw == "auto" else parse_cpulist(raw)
    except ValueError as exc:
        _log.warning("%s=%r: %s; the proxy keeps the process's CPU binding", CPUS_ENV, raw, exc)
        return None
    if not want:
        return None
    try:
        os.sched_setaffinity(0, want)
    except OSError as exc:
        _log.info("proxy thread stays on CPUs %s (could not move to %s: %s)", sorted(bound), sorted(want), exc)
        return None
    return os.sched_getaffinity(0)
