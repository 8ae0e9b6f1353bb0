"""Pick an algorithm per collective and message size from a selection table, and build it once.

The table maps a collective to ``[(max_bytes, algorithm name), ...]`` in ascending size; the tuner
(``python -m pymscclpp.bench --tune``) writes one per machine to ``PYMSCCLPP_TUNING_FILE``.
"""

from __future__ import annotations

import json
import os

from ..errors import InvalidUsageError
from ..runtime.backend import IS_SIM
from .allreduce import PacketAllReduce, SimpleAllReduce

_INF = float("inf")
# Measured on 2 x H200 (docs/performance.md); the simulator uses few threads.
DEFAULT_TABLE = {"all_reduce": [(1 << 20, "packet"), (_INF, "simple")]}
_PACKET_MAX = 1 << 20


def _factories(comm) -> dict:
    blocks, threads = (2, 32) if IS_SIM else (32, 512)
    s_blocks, s_threads = (2, 32) if IS_SIM else (64, 512)
    round_bytes = (1 << 16) if IS_SIM else (32 << 20)
    return {
        ("all_reduce", "packet"): lambda: PacketAllReduce(comm, _PACKET_MAX, blocks, threads),
        ("all_reduce", "simple"): lambda: SimpleAllReduce(comm, round_bytes, s_blocks, s_threads),
    }


def load_table() -> dict:
    """The selection table: the tuner's file if PYMSCCLPP_TUNING_FILE names one, else the defaults."""
    path = os.environ.get("PYMSCCLPP_TUNING_FILE")
    if not path:
        return DEFAULT_TABLE
    try:
        with open(path) as f:
            raw = json.load(f)
        return {op: [(float(limit), str(name)) for limit, name in rows] for op, rows in raw.items()}
    except (OSError, ValueError, TypeError) as exc:
        raise InvalidUsageError(f"PYMSCCLPP_TUNING_FILE={path!r}: cannot read a selection table ({exc})") from None


def choose(comm, collective: str, nbytes: int, forced: str | None = None):
    """The algorithm instance for ``collective`` at ``nbytes`` (``forced`` names one), built on first use."""
    factories = _factories(comm)
    if forced is None:
        rows = load_table().get(collective, [])
        forced = next((name for limit, name in rows if nbytes <= limit), None)
        if forced is None:
            raise InvalidUsageError(f"no {collective} algorithm covers {nbytes} bytes")
    key = (collective, forced)
    if key not in factories:
        names = sorted(n for c, n in factories if c == collective)
        raise InvalidUsageError(f"unknown {collective} algorithm {forced!r}: choose from {names}")
    if forced == "packet" and nbytes > _PACKET_MAX:
        raise InvalidUsageError(f"{collective} algorithm 'packet' handles at most {_PACKET_MAX} bytes, got {nbytes}")
    if key not in comm._algos:
        comm._algos[key] = factories[key]()
    return comm._algos[key]
