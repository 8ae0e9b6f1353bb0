"""Pick an algorithm per collective and message size from a selection table, and build it once.

The table maps a collective to ``[(max_bytes, algorithm name), ...]`` in ascending size; the tuner
(``python -m pymscclpp.bench.tune``) writes one per machine to ``PYMSCCLPP_TUNING_FILE``. Sizes follow
nccl-tests: all_gather counts the gathered output, reduce_scatter and all_to_all the send buffer.
"""

from __future__ import annotations

import json
import os

from ..errors import InvalidUsageError
from ..runtime.backend import IS_SIM
from .allgather import AllGather
from .allreduce import AllReduce
from .alltoall import AllToAll
from .broadcast import Broadcast
from .reducescatter import ReduceScatter

_INF = float("inf")
_ONE_SHOT = {"all_gather": AllGather, "reduce_scatter": ReduceScatter, "all_to_all": AllToAll,
             "broadcast": Broadcast}
# all_reduce measured on 2 x H200 (docs/performance.md); the others take its packet/simple threshold for now.
DEFAULT_TABLE = {"all_reduce": [(16 << 10, "packet"), (256 << 10, "packet_wide"), (_INF, "simple")],
                 **{name: [(256 << 10, "packet"), (_INF, "simple")] for name in _ONE_SHOT}}
_PACKET_MAX = 1 << 20


def _factories(comm) -> dict:
    """Algorithm builders by (collective, name); the simulator runs few, small blocks."""
    sim = IS_SIM
    factories = {
        ("all_reduce", "packet"): lambda: AllReduce.packet(comm, _PACKET_MAX, *((2, 32) if sim else (16, 256))),
        ("all_reduce", "packet_wide"): lambda: AllReduce.packet(comm, _PACKET_MAX, *((2, 32) if sim else (64, 512))),
    }
    for name, cls in {"all_reduce": AllReduce, **_ONE_SHOT}.items():
        factories.setdefault((name, "packet"), lambda cls=cls: cls.packet(comm, _PACKET_MAX,
                                                                          *((2, 32) if sim else (64, 512))))
        factories[(name, "simple")] = lambda cls=cls: cls.simple(comm, (1 << 16) if sim else (32 << 20),
                                                                 *((2, 32) if sim else (128, 512)))
    return factories


def load_table() -> dict:
    """The selection table: the defaults, overridden per collective by the tuner's file if
    PYMSCCLPP_TUNING_FILE names one."""
    path = os.environ.get("PYMSCCLPP_TUNING_FILE")
    if not path:
        return DEFAULT_TABLE
    try:
        with open(path) as f:
            raw = json.load(f)
        tuned = {op: [(float(limit), str(name)) for limit, name in rows] for op, rows in raw.items()}
    except (OSError, ValueError, TypeError) as exc:
        raise InvalidUsageError(f"PYMSCCLPP_TUNING_FILE={path!r}: cannot read a selection table ({exc})") from None
    return {**DEFAULT_TABLE, **tuned}


def choose(comm, collective: str, nbytes: int, forced: str | None = None):
    """The algorithm instance for ``collective`` at ``nbytes`` (``forced`` names one), built on first use."""
    if forced is None:
        if comm._table is None:
            comm._table = load_table()
        forced = next((name for limit, name in comm._table.get(collective, ()) if nbytes <= limit), None)
        if forced is None:
            raise InvalidUsageError(f"no {collective} algorithm covers {nbytes} bytes")
    impl = _build(comm, collective, forced)
    if nbytes > impl.max_bytes:
        raise InvalidUsageError(f"{collective} algorithm {forced!r} handles at most {impl.max_bytes} bytes, "
                                f"got {nbytes}")
    return impl


def _build(comm, collective: str, name: str):
    """The communicator's instance of algorithm ``name``, built (collectively) on first use."""
    impl = comm._algos.get((collective, name))
    if impl is None:
        factories = _factories(comm)
        if (collective, name) not in factories:
            names = sorted(n for c, n in factories if c == collective)
            raise InvalidUsageError(f"unknown {collective} algorithm {name!r}: choose from {names}")
        impl = comm._algos[(collective, name)] = factories[(collective, name)]()
    return impl


def algorithms(comm, collective: str) -> list[str]:
    """Names of the algorithms ``collective`` can use."""
    return [name for c, name in _factories(comm) if c == collective]


def limit(comm, collective: str, name: str) -> float:
    """The largest size algorithm ``name`` handles (builds it: call on every rank alike)."""
    return _build(comm, collective, name).max_bytes
