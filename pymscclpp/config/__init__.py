"""Every ``PYMSCCLPP_*`` environment variable, declared once: name, type, default, meaning and accepted values.

The lowest layer (it imports only ``errors``), so every layer reads its settings here. Values are read at use, never
frozen at import (a variable set later takes effect), and a bad value raises an error naming the variable and what it
accepts. ``python -m pymscclpp.config`` prints the effective configuration and where each value came from.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..errors import BackendError, InvalidUsageError

MAX_TIMEOUT_S = 1e7  # ~4 months: budgets travel to the device as u64 nanoseconds
LOG_LEVELS = ("ERROR", "WARN", "WARNING", "INFO", "DEBUG", "TRACE")


@dataclass(frozen=True)
class Variable:
    """One environment variable: ``parse`` turns its stripped, non-empty text into the value or raises ValueError."""

    name: str
    kind: str              # the type, in a word: bool, int, float, choice, text, path
    default: Any           # the value when unset or empty (None: decided by the caller, as ``default_text`` says)
    default_text: str      # the default in words
    accepted: str          # the accepted values in words, for errors
    meaning: str
    parse: Callable[[str], Any]
    error: type[Exception] = InvalidUsageError

    def read(self, environ: Mapping[str, str] | None = None) -> Any:
        """The value from ``environ`` (default: ``os.environ``), or the default when unset or empty."""
        text = (os.environ if environ is None else environ).get(self.name, "").strip()
        if not text:
            return self.default
        try:
            return self.parse(text)
        except ValueError:
            raise self.error(f"{self.name}={text!r}: expected {self.accepted}") from None


def _choice(names: Mapping[str, Any]) -> Callable[[str], Any]:
    """A parser of one of ``names`` (any case) to its value."""
    def parse(text: str) -> Any:
        if text.lower() not in names:
            raise ValueError(text)
        return names[text.lower()]
    return parse


def _int(low: int, high: int, base: int = 10) -> Callable[[str], int]:
    """A parser of an integer in ``[low, high]``."""
    def parse(text: str) -> int:
        value = int(text, base)
        if not low <= value <= high:
            raise ValueError(text)
        return value
    return parse


def _seconds(text: str) -> float | None:
    """A budget in seconds, ``None`` for 0 (off)."""
    value = float(text)
    if not 0 <= value <= MAX_TIMEOUT_S:  # also refuses nan
        raise ValueError(text)
    return None if value == 0 else value


def _non_negative(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(text)
    return value


def _debug(text: str) -> tuple[str, tuple[str, ...]]:
    """``LEVEL[:subsys,...]`` -> (level, subsystems)."""
    level, _, subsystems = text.partition(":")
    if level.upper() not in LOG_LEVELS:
        raise ValueError(text)
    return level.upper(), tuple(s.strip() for s in subsystems.split(",") if s.strip())


def _cpus(text: str) -> str:
    """``auto``, ``inherit`` or a CPU list (``0-3,8``), checked for its syntax."""
    if text.lower() in ("auto", "inherit"):
        return text.lower()
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        if not first.isdigit() or (last and not (last.isdigit() and int(first) <= int(last))):
            raise ValueError(text)
    return text


def _hex_token(text: str) -> bytes:
    token = bytes.fromhex(text)
    if len(token) != 16:
        raise ValueError(text)
    return token


_ON_OFF = {"1": True, "0": False}
_LIVENESS = {"1": True, "on": True, "true": True, "yes": True, "0": False, "off": False, "false": False, "no": False}
TRANSPORTS = {"auto": "auto", "cuda_ipc": "cuda_ipc", "cudaipc": "cuda_ipc", "ipc": "cuda_ipc", "ethernet": "ethernet",
              "eth": "ethernet", "tcp": "ethernet", "ib": "ib", "rdma": "ib"}

VARIABLES: dict[str, Variable] = {v.name: v for v in [
    Variable("PYMSCCLPP_BACKEND", "choice", "auto", "auto", "one of auto, gpu, sim, compile",
             "`auto` (the GPU if one is visible, else the simulator), `gpu`, `sim`; `compile` builds GPU code with no "
             "GPU (tests); read once, when pymscclpp is imported",
             _choice({c: c for c in ("auto", "gpu", "sim", "compile")}), BackendError),
    Variable("PYMSCCLPP_TIMEOUT_S", "float", 120.0, "120", f"a number of seconds in [0, {MAX_TIMEOUT_S:g}] "
             "(0 turns budgets off)", "budget of every host and device wait, seconds; `0` turns budgets off", _seconds),
    Variable("PYMSCCLPP_DEBUG", "text", None, "off", f"LEVEL or LEVEL:subsystem,... with LEVEL one of "
             f"{', '.join(LOG_LEVELS)}", "logging: `INFO`, `DEBUG`, or `DEBUG:bootstrap,memory` for some subsystems; "
             "read once, at the first log line", _debug),
    Variable("PYMSCCLPP_HOST_ID", "text", None, "host name and boot id", "any text",
             "pretend to be on another host (tests of cross-host paths)", str),
    Variable("PYMSCCLPP_JOB_TOKEN", "text", None, "a digest of MASTER_ADDR, MASTER_PORT, WORLD_SIZE, "
             "TORCHELASTIC_RUN_ID", "32 hex digits", "job token of `from_env()` launches", _hex_token),
    Variable("PYMSCCLPP_SOCKET_ADDR", "text", None, "this host name's address, else 127.0.0.1", "a host name or IP "
             "address", "address the bootstrap root and the proxies listen on", str),
    Variable("PYMSCCLPP_BOOTSTRAP_MAX_MSG", "int", 256 << 20, "268435456 (256 MiB)", "a number of bytes between 1 and "
             "2**63-1", "largest bootstrap message accepted, bytes", _int(1, 2**63 - 1, 0)),
    Variable("PYMSCCLPP_MAX_SEMAPHORES", "int", 4096, "4096", "a positive integer", "semaphore slots per rank",
             _int(1, 2**31 - 1)),
    Variable("PYMSCCLPP_LIVENESS", "bool", True, "1", "1 (on, true, yes) or 0 (off, false, no)",
             "`1`: a communicator watches its peers' heartbeats and ends its kernels' waits when one dies; `0`: off",
             _choice(_LIVENESS)),
    Variable("PYMSCCLPP_ASYNC_ERROR_HANDLING", "choice", "none", "0", "0 (or none: the next call raises) or 1 (or "
             "abort)", "what the watchdog does with a device error: `0`/`none` (log it, the next check raises), "
             "`1`/`abort` (abort the process)", _choice({"0": "none", "none": "none", "1": "abort", "abort": "abort"})),
    Variable("PYMSCCLPP_CACHE_DIR", "path", None, "~/.cache/pymscclpp", "a folder",
             "the kernel cache: compiled kernels and the executor's generated code; `python -m pymscclpp.precompile` "
             "fills it", str),
    Variable("PYMSCCLPP_LAUNCH", "choice", "packed", "packed", "packed, params or numba",
             "how kernels are launched on GPUs: `packed` (one parameter buffer), `params` (a pointer per parameter), "
             "`numba` (numba's own launch); always numba's under the simulator",
             _choice({c: c for c in ("packed", "params", "numba")}), BackendError),
    Variable("PYMSCCLPP_GRAPH_REPEATS", "bool", True, "1", "1 (the default) or 0 (off)",
             "`1`: a kernel launched again with unchanged arguments (an eager collective repeated on the same "
             "buffers) goes out as a one-node CUDA graph, cheaper on the host; `0`: always `cuLaunchKernel`",
             _choice(_ON_OFF)),
    Variable("PYMSCCLPP_CHECK", "bool", True, "1", "1 (check every call, the default) or 0 (off)",
             "`1`: the one-shot collectives, plans and user algorithms (on one host) compare the ranks' calls on the "
             "device and raise `CallMismatchError` naming both sides; `0`: off (`docs/reliability.md`)",
             _choice(_ON_OFF)),
    Variable("PYMSCCLPP_MAX_BLOCKS", "int", 0, "0 (no cap)", "a non-negative number of blocks (0: no cap)",
             "cap on every built-in kernel's grid (unset: the configured grid, or the SMs a rank has when the "
             "grid does not fit them, as under MPS)", _int(0, 2**31 - 1)),
    Variable("PYMSCCLPP_TUNING_FILE", "path", None, "none: the built-in table", "a JSON file",
             "selection table written by the tuner (`python -m pymscclpp.bench.tune`)", str),
    Variable("PYMSCCLPP_SEND_RECV_ZERO_COPY", "bool", True, "1", "1 or 0",
             "`1`: a receiver reads what a peer sends it straight from the peer's send buffer where that buffer "
             "starts a registered buffer (`register_buffer`) of the same registration as the receiver's send "
             "buffer (receiving only: its receive buffer), one send buffer a call; every other pair stages; `0`: "
             "send/recv stage",
             _choice(_ON_OFF)),
    Variable("PYMSCCLPP_GRAPH_ZERO_COPY", "bool", True, "1", "1 or 0",
             "`1`: an all-reduce, reduce-scatter, all-gather, out-of-place all-to-all or broadcast captured into a CUDA "
             "graph maps its buffers on every rank and runs "
             "zero-copy (every rank must capture the same calls); `0`: captured calls stage through scratch",
             _choice(_ON_OFF)),
    Variable("PYMSCCLPP_TRAFFIC", "bool", False, "0", "1 (count channel traffic under the simulator) or 0",
             "`1`: under the simulator, count the bytes every MemoryChannel moves (`runtime/traffic.py`, "
             "`python -m pymscclpp.bench --op traffic`); `0`: off", _choice(_ON_OFF)),
    Variable("PYMSCCLPP_SIM_THREADS", "int", 4, "4", "a positive integer",
             "threads that play each plan thread block under the simulator (the executor)", _int(1, 1024)),
    Variable("PYMSCCLPP_MAX_SCRATCH_BYTES", "int", None, "the GPU's free memory (1 GiB on the simulator)",
             "a positive number of bytes", "cap on a plan's scratch buffer (the executor)", _int(1, 2**63 - 1, 0)),
    Variable("PYMSCCLPP_TRANSPORT", "choice", "auto", "auto", "auto, cuda_ipc, ethernet or ib",
             "PortChannel transport: `auto` (by topology), `cuda_ipc`, `ethernet`, `ib`", _choice(TRANSPORTS)),
    Variable("PYMSCCLPP_IB_DEVICE", "text", None, "the first RDMA device", "an RDMA device name (ibv_devices)",
             "the RDMA device of the IB transport", str),
    Variable("PYMSCCLPP_IB_PORT", "int", 1, "1", "a port number in [1, 255]", "the RDMA device's port",
             _int(1, 255)),
    Variable("PYMSCCLPP_IB_GID_INDEX", "int", 0, "0", "a GID index in [0, 255]", "the port's GID index (RoCE)",
             _int(0, 255)),
    Variable("PYMSCCLPP_PROXY_CPUS", "text", None, "auto on GPUs, inherit on the simulator",
             "auto, inherit or a CPU list such as 8-15,40", "CPUs of the proxy thread: `auto` (the GPU's NUMA node), "
             "`inherit` (the process's binding) or a CPU list", _cpus),
    Variable("PYMSCCLPP_PROXY_SPIN_US", "float", None, "100000 on GPUs, 0 on the simulator",
             "a non-negative number of microseconds", "how long an idle proxy busy-polls before it sleeps between "
             "polls, microseconds", _non_negative),
    Variable("PYMSCCLPP_NCCL_LIB", "path", None, "the nvidia-nccl wheel's, else the system's libnccl.so.2",
             "a path to libnccl.so.2", "the libnccl the NCCL fallback loads (only that one, when set)", str),
    Variable("PYMSCCLPP_TORCH_FALLBACK", "choice", None, "nccl on GPUs, none on the simulator", "nccl, gloo or none",
             "the group serving what the torch backend does not: `nccl`, `gloo` (CPU tensors), `none` (raise)",
             _choice({c: c for c in ("nccl", "gloo", "none")})),
]}


def _variable(name: str) -> Variable:
    try:
        return VARIABLES[name]
    except KeyError:
        raise KeyError(f"{name} is not a declared pymscclpp variable (pymscclpp/config)") from None


def get(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """The value of variable ``name`` from ``environ`` (default: ``os.environ``), checked; its default when unset."""
    return _variable(name).read(environ)


def is_set(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``name`` is set to a non-empty value (its default is not in force)."""
    return bool((os.environ if environ is None else environ).get(_variable(name).name, "").strip())


def set_value(name: str, text: str) -> None:
    """Set variable ``name`` to ``text`` for this process (and the processes it starts), checked first: what a tool
    that needs one setting (the tuner's staged calls) does before it makes a communicator."""
    _variable(name).read({name: text})
    os.environ[name] = text


def checked_timeout_s(value: Any, where: str) -> float | None:
    """A budget in seconds given as an argument (``where`` names it), in [0, MAX_TIMEOUT_S]; ``None`` for 0 (off)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_TIMEOUT_S:
        raise InvalidUsageError(f"{where}: must be a number of seconds in [0, {MAX_TIMEOUT_S:g}] "
                                "(0 turns budgets off)")
    return None if value == 0 else float(value)


def table() -> str:
    """The Markdown table of every variable (README's "Environment variables")."""
    rows = ["| variable | type | default | meaning |", "| --- | --- | --- | --- |"]
    rows += [f"| `{v.name}` | {v.kind} | {v.default_text} | {v.meaning} |" for v in VARIABLES.values()]
    return "\n".join(rows)


def effective(environ: Mapping[str, str] | None = None) -> list[tuple[str, str, str]]:
    """(name, value, source) per variable: the text set (source ``environment``, or the error when it is refused) or
    the default in words (source ``default``)."""
    env = os.environ if environ is None else environ
    rows = []
    for v in VARIABLES.values():
        if not is_set(v.name, env):
            rows.append((v.name, v.default_text, "default"))
            continue
        try:
            v.read(env)
            rows.append((v.name, env[v.name].strip(), "environment"))
        except Exception as exc:  # the declared error class of that variable
            rows.append((v.name, env[v.name].strip(), f"environment, refused: {exc}"))
    return rows
