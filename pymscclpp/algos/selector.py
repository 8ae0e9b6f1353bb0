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
# Measured on 2 x H200 (docs/performance.md).
DEFAULT_TABLE = {"all_reduce": [(16 << 10, "packet"), (256 << 10, "packet_wide"), (_INF, "simple")]}
_PACKET_MAX = 1 << 20


def _factories(comm) -> dict:
    """Algorithm builders by (collective, name); the simulator runs few, small blocks."""
    sim = IS_SIM
    return {
        ("all_reduce", "packet"): lambda: PacketAllReduce(comm, _PACKET_MAX, *((2, 32) if sim else (16, 256))),
        ("all_reduce", "packet_wide"): lambda: PacketAllReduce(comm, _PACKET_MAX, *((2, 32) if sim else (64, 512))),
        ("all_reduce", "simple"): lambda: SimpleAllReduce(comm, (1 << 16) if sim else (32 << 20),
                                                           *((2, 32) if sim else (128, 512))),
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
    if forced is None:
        if comm._table is None:
            comm._table = load_table()
        forced = next((name for limit, name in comm._table.get(collective, ()) if nbytes <= limit), None)
        if forced is None:
            raise InvalidUsageError(f"no {collective} algorithm covers {nbytes} bytes")
    impl = comm._algos.get((collective, forced))
    if impl is None:
        factories = _factories(comm)
        if (collective, forced) not in factories:
            names = sorted(n for c, n in factories if c == collective)
            raise InvalidUsageError(f"unknown {collective} algorithm {forced!r}: choose from {names}")
        impl = comm._algos[(collective, forced)] = factories[(collective, forced)]()
    if nbytes > impl.max_bytes:
        raise InvalidUsageError(f"{collective} algorithm {forced!r} handles at most {impl.max_bytes} bytes, "
                                f"got {nbytes}")
    return impl
