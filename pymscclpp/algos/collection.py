"""A communicator's algorithms and the choice among them: built-in one-shot kernels, library plans and the user's
own, picked per call by a selection table (defaults, or the tuner's ``PYMSCCLPP_TUNING_FILE``).

The table maps a collective to ``[(max_bytes, algorithm name), ...]`` in ascending size; sizes follow
nccl-tests (all_gather counts the gathered output, reduce_scatter and all_to_all the send buffer). The table's
choice is used when it can serve the call; otherwise the first registered algorithm that can. Rows under
``collective + ZERO_COPY`` name what serves a call that runs zero-copy (its buffers registered, or captured into a
graph) where that beats the staged choice: the first row covering the size whose algorithm can serve the call
(a row for out-of-place calls may come before one for any call); a row naming a kernel that never runs zero-copy
keeps such calls on the staged choice. An algorithm is set up (collectively) on first use; the choice per
call shape is remembered, so a repeated call costs one lookup.
"""

from __future__ import annotations

import json
import weakref
from typing import Callable

from .. import config
from ..errors import InvalidUsageError
from ..runtime.backend import IS_SIM
from .algorithm import COLLECTIVES, Algorithm, Call
from .counts_oneshot import AllToAllvOneShot
from .counts_read import AllToAllvRead
from .cross_host import CrossHost
from .library_plans import LibraryPlan
from .exchange import EXCHANGED, Exchange
from .exchange_port import CrossHostExchange
from .oneshot import BY_COLLECTIVE, PACKET_MAX, AllReduce, Reduce
from .push import PUSH
from .twoshot import TWO_STEP
from .twoshot_packet import AllReduceTwoShotPacket, BroadcastTwoStepPacket

_INF = float("inf")
TWO_STEP_NAMES = {"all_reduce": "rsag", "all_gather": "read", "broadcast": "scatter_gather", "reduce_scatter": "read",
                  "reduce": "rsag"}
_CHOICES = 256  # remembered call shapes
ZERO_COPY = "@zero_copy"  # a table key's suffix: the rows of a collective's calls that run zero-copy
# at 2 ranks, all-reduces and reduces up to this size run their packets on one block of 256 threads (a packet per
# thread): 0.8 us faster at 1-2 KB than on 16 blocks, slower from 4 KB (docs/performance.md)
ONE_BLOCK_MAX = 2 << 10
# at 8 ranks, staged all-reduces above the one-shot packets and up to this size run the two-shot packets: 128 and
# 256 KB 1.6-1.9x faster than rsag (H100, docs/performance.md); 512 KB 1.4x slower
RSAG_PACKET_MAX = 256 << 10
# at 8 ranks, staged broadcasts above the one-shot packets and up to this size run the two-step packets: 128-512 KB
# 1.9-2.6x faster than the staged scatter + all-gather (H100, docs/performance.md); 1 MB alike
BROADCAST_PACKET_MAX = 512 << 10
# algorithms set up together, in one collective set-up: the verbs' exchanges share lanes with every peer, and a
# rank's first call of them may be any verb (two ranks' send/recv while a third's first is a gather)
SET_UP_TOGETHER = [frozenset((c, name) for c in EXCHANGED) for name in ("exchange", "cross_host")]
# why a peer may not begin that set-up, for the error when one does not
TOGETHER_ABSENT = ("the verbs set up their channels at each rank's first call of them, collectively: every rank "
                   "makes a send/recv with another rank, an all-to-all with counts, a gather, scatter or reduce "
                   "before that first call completes")


def default_table(nranks: int) -> dict:
    """The built-in selection table for ``nranks`` ranks, from one H200 shared by the ranks (docs/performance.md):
    packets for small messages (at 2 ranks, to ``ONE_BLOCK_MAX``, an all-reduce or reduce on one block); above, the
    two-step kernels from 3 ranks up (from 64 KB at 8 ranks, where the one-shot packets move 7x the bytes; there the
    all-reduce's as packets to ``RSAG_PACKET_MAX``, but for calls that run zero-copy, which keep ``rsag``), and at 2
    ranks the one-shot simple kernels, except a two-shot all-reduce from 16 MB; reduce as the all-reduce's packets
    (its non-roots drop their result), then two-step (at 2 ranks the verbs' exchange between, to 1 MB); broadcast
    from 3 ranks in two steps from 64 KB (the root's packets to every peer cost 2x the scatter + all-gather at 256
    KB at 4 ranks), at 8 ranks as packets to ``BROADCAST_PACKET_MAX`` but for calls that run zero-copy; all-to-all
    with counts from 3 ranks as packets to 256 KB, then in simple rounds (1-16 MB at 4 and 8 ranks 1.5-2.5x faster
    than the verbs' exchange; at 2 ranks the exchange to 256 KB), and when it runs zero-copy, at every size, read
    from peers' buffers between two meetings of all ranks (at 3, 4, 6 and 8 ranks 1-256 KB faster than the packets
    by 1.1-12 us, H100); for calls that run zero-copy, the even all-to-all's zero-copy kernel at every size (1-256
    KB at 2, 4, 6 and 8 ranks 1.7-12 us faster than its packets, H100), the two-step all-reduce from 256 KB and
    reduce-scatter from 4 MB."""
    packet_max = 64 << 10 if nranks >= 8 else 256 << 10
    small = [*([(ONE_BLOCK_MAX, "packet_one_block")] if nranks <= 2 else []), (16 << 10, "packet"),
             (packet_max, "packet_wide")]
    middle = [(16 << 20, "simple")] if nranks <= 2 else [(RSAG_PACKET_MAX, "rsag_packet")] if nranks >= 8 else []
    table = {"all_reduce": [*small, *middle, (_INF, "rsag")], **{c: [(_INF, "exchange")] for c in EXCHANGED}}
    if nranks >= 8:  # zero-copy calls keep rsag's zero-copy kernel, not yet timed against the two-shot packets
        table["all_reduce" + ZERO_COPY] = [(packet_max, "packet_wide"), (_INF, "rsag")]
    # at 2 ranks the exchange's two meetings cost less than the call check's one to 256 KB (H100, 2026-12-06)
    table["all_to_allv"] = [(256 << 10, "exchange" if nranks <= 2 else "packet"), (_INF, "simple")]
    if nranks > 2:
        table["all_to_allv" + ZERO_COPY] = [(_INF, "read")]
    table["all_to_all" + ZERO_COPY] = [(_INF, "simple")]
    table["reduce"] = [*small, *([(1 << 20, "exchange")] if nranks <= 2 else []), (_INF, "rsag")]
    if nranks <= 2:
        table["all_reduce" + ZERO_COPY] = [(256 << 10, "packet_wide"), (_INF, "rsag")]
        table["reduce_scatter" + ZERO_COPY] = [(256 << 10, "packet"), (4 << 20, "simple"), (_INF, "read")]
    for name in BY_COLLECTIVE:
        if name != "all_reduce":
            two_step = name in TWO_STEP and nranks > 2
            packets = 64 << 10 if name == "broadcast" and two_step else packet_max if two_step else 256 << 10
            table[name] = [(packets, "packet"), (_INF, TWO_STEP_NAMES[name] if two_step else "simple")]
    if nranks >= 8:  # zero-copy calls keep the zero-copy scatter + all-gather, not timed against the packets
        table["broadcast" + ZERO_COPY] = list(table["broadcast"])
        table["broadcast"].insert(1, (BROADCAST_PACKET_MAX, "scatter_gather_packet"))
    return table


def builtin_factories() -> dict[tuple[str, str], Callable[[], Algorithm]]:
    """Builders of the built-in algorithms by (collective, name); the simulator runs few, small blocks."""
    grid = {"packet": (2, 32) if IS_SIM else (64, 512), "packet_narrow": (2, 32) if IS_SIM else (16, 256),
            "packet_one_block": (1, 32) if IS_SIM else (1, ONE_BLOCK_MAX // 8),
            "simple": (2, 32) if IS_SIM else (128, 512)}
    out: dict = {}
    for collective, cls in BY_COLLECTIVE.items():
        out[collective, "packet"] = lambda cls=cls: cls("packet", "packet", *grid["packet"], PACKET_MAX)
        out[collective, "simple"] = lambda cls=cls: cls("simple", "simple", *grid["simple"])
    for collective, cls in TWO_STEP.items():
        out[collective, TWO_STEP_NAMES[collective]] = lambda cls=cls, n=TWO_STEP_NAMES[collective]: \
            cls(n, "simple", *grid["simple"])
    for collective, cls in PUSH.items():
        out[collective, "push"] = lambda cls=cls: cls("push", "simple", *grid["simple"])
    for collective in BY_COLLECTIVE:  # ranks on several hosts: the one-shot kernels need one host, these do not
        out[collective, "cross_host_packet"] = lambda c=collective: CrossHost("cross_host_packet", c, "packet",
                                                                              64 << 10)
        out[collective, "cross_host"] = lambda c=collective: CrossHost("cross_host", c)
    for collective in EXCHANGED:
        out[collective, "exchange"] = lambda c=collective: Exchange(c)
        out[collective, "cross_host"] = lambda c=collective: CrossHostExchange(c)
    for collective, cls in (("all_reduce", AllReduce), ("reduce", Reduce)):
        out[collective, "packet"] = lambda cls=cls: cls("packet", "packet", *grid["packet_narrow"], PACKET_MAX)
        out[collective, "packet_wide"] = lambda cls=cls: cls("packet_wide", "packet", *grid["packet"], PACKET_MAX)
        out[collective, "packet_one_block"] = lambda cls=cls: cls("packet_one_block", "packet",
                                                                  *grid["packet_one_block"], PACKET_MAX)
    out["all_reduce", "rsag_packet"] = lambda: AllReduceTwoShotPacket("rsag_packet", *grid["packet"])
    out["broadcast", "scatter_gather_packet"] = lambda: BroadcastTwoStepPacket("scatter_gather_packet",
                                                                               *grid["packet"])
    out["all_to_allv", "packet"] = lambda: AllToAllvOneShot("packet", "packet", *grid["packet"], PACKET_MAX)
    out["all_to_allv", "simple"] = lambda: AllToAllvOneShot("simple", "simple", *grid["simple"])
    out["all_to_allv", "read"] = lambda: AllToAllvRead(*grid["simple"])
    return out


def load_table(nranks: int = 2) -> dict:
    """The selection table for ``nranks`` ranks: the defaults, overridden per collective by the tuner's file if
    PYMSCCLPP_TUNING_FILE names one. The file maps each collective to its rows, or each rank count ("8") to such a
    table (the tuner writes one per rank count it ran at); a rank count it lacks keeps the defaults, and a
    collective the file names loses the defaults' zero-copy rows unless the file gives its own."""
    defaults = default_table(nranks)
    path = config.get("PYMSCCLPP_TUNING_FILE")
    if not path:
        return defaults
    try:
        with open(path) as f:
            raw = json.load(f)
        if raw and all(str(key).isdigit() for key in raw):
            raw = raw.get(str(nranks), {})
        tuned = {op: [(float(limit), str(name)) for limit, name in rows] for op, rows in raw.items()}
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        raise InvalidUsageError(f"PYMSCCLPP_TUNING_FILE={path!r}: cannot read a selection table ({exc})") from None
    merged = {**defaults, **tuned}
    for op in tuned:  # the tuner measured these calls: the defaults' zero-copy rows no longer override it
        if op + ZERO_COPY not in tuned:
            merged.pop(op + ZERO_COPY, None)
    return merged


Choice = tuple[Algorithm, "Algorithm | None"]
"""A call shape's algorithm and, where the zero-copy rows name another, that one for calls that run zero-copy."""


def pick(choice: Choice, call: Call) -> Algorithm:
    """The algorithm of ``choice`` that serves ``call``: the zero-copy one when the call runs zero-copy."""
    algo, zero_copy = choice
    return zero_copy if zero_copy is not None and zero_copy.runs_zero_copy(call) else algo


class AlgorithmCollection:
    """The algorithms one communicator can use, by collective and name, and the per-call choice among them."""

    def __init__(self, comm):
        self.comm = weakref.proxy(comm)  # the communicator holds the collection: no cycle to wait for the gc
        self.table = load_table(comm.size)
        self._factories = builtin_factories()
        self._built: dict[tuple[str, str], Algorithm] = {}
        self._ready: set[tuple[str, str]] = set()
        self._choice: dict[tuple, Algorithm] = {}  # call shape -> choice; cleared by a registration
        self._preferred: list[tuple[str, str]] = []  # registered to be tried before the table, newest first
        self.generation = 0  # bumped by every registration: choices made before it are stale
        self.served: dict[str, Algorithm] = {}  # collective -> the algorithm ``select`` last chose

    def names(self, collective: str) -> list[str]:
        """Names of the algorithms registered for ``collective``, in registration order."""
        return [n for c, n in self._factories if c == collective]

    def register(self, algorithm: Algorithm | Callable[[], Algorithm], collective: str | None = None,
                 name: str | None = None, prefer: bool = False) -> None:
        """Add ``algorithm`` (or a builder of one, made on first use) under its collective and name; a name
        already used for the collective is replaced. ``prefer``: try it before the table for every call it can
        serve. Call it on every rank alike."""
        if isinstance(algorithm, Algorithm):
            collective, name = collective or algorithm.collective, name or algorithm.name
            built = algorithm
            self._factories[collective, name] = lambda: built
        elif collective is None or name is None:
            raise InvalidUsageError("register: an algorithm builder needs its collective and name")
        else:
            self._factories[collective, name] = algorithm
        if collective not in COLLECTIVES:
            raise InvalidUsageError(f"register: unknown collective {collective!r}: choose from {COLLECTIVES}")
        if not name:
            raise InvalidUsageError("register: an algorithm needs a name")
        key = (collective, name)
        self._built.pop(key, None)
        self._ready.discard(key)
        self._choice.clear()
        self.generation += 1
        if key in self._preferred:
            self._preferred.remove(key)
        if prefer:
            self._preferred.insert(0, key)

    def get(self, collective: str, name: str) -> Algorithm:
        """The algorithm ``name`` of ``collective``, set up on this communicator (collectively, on first use; with
        the rest of its ``SET_UP_TOGETHER`` family)."""
        key = (collective, name)
        algo = self._build(key)
        if key not in self._ready:
            family = next((sorted(f) for f in SET_UP_TOGETHER if key in f), [key])
            what = f"{collective} algorithm {name!r}" if len(family) == 1 else \
                f"the {name!r} algorithms of {', '.join(c for c, _ in family)}"
            with self.comm.setup(what, "" if len(family) == 1 else TOGETHER_ABSENT):  # a failure raises on all
                for k in family:
                    self._build(k).setup(self.comm)
            self._ready.update(family)
        return algo

    def peek(self, collective: str, name: str) -> Algorithm:
        """The algorithm ``name`` of ``collective`` as built, not set up (no collective step): what it is, for a tool
        choosing among algorithms (the tuner asks which have a zero-copy kernel)."""
        return self._build((collective, name))

    def _build(self, key: tuple[str, str]) -> Algorithm:
        algo = self._built.get(key)
        if algo is None:
            if self._factory(*key) is None:
                raise InvalidUsageError(f"unknown {key[0]} algorithm {key[1]!r}: choose from {self.names(key[0])}")
            algo = self._built[key] = self._factories[key]()
        return algo

    def _factory(self, collective: str, name: str) -> Callable[[], Algorithm] | None:
        """The builder of algorithm ``name``; a library plan's name (``plan:...``, ``library_plans``) gets one on
        first use, so a tuning file or ``algo=`` can name any library program with its parameters."""
        key = (collective, name)
        if key not in self._factories:
            spec = LibraryPlan.parse(name)
            if spec is None:
                return None
            self._factories[key] = lambda n=self.comm.size: spec.algorithm(n, collective)
        return self._factories[key]

    def select(self, call: Call, forced: str | None = None) -> Algorithm:
        """The algorithm serving ``call``: ``forced`` by name, else the table's choice if it can serve the call,
        else the first registered one that can. Raises InvalidUsageError naming why none can."""
        algo = pick(self.choice(call, forced), call)
        self.served[call.collective] = algo
        return algo

    def choice(self, call: Call, forced: str | None = None) -> Choice:
        """What serves ``call``'s shape (``select`` without the pick; a kept call repeats it with ``pick``)."""
        shape = (call.collective, call.message_bytes, call.dtype, call.op, call.in_place, forced)
        choice = self._choice.get(shape)
        if choice is None:
            choice = self._choose(call, forced)
            if len(self._choice) >= _CHOICES:
                self._choice.clear()
            self._choice[shape] = choice
        return choice

    def _choose(self, call: Call, forced: str | None) -> Choice:
        """(the algorithm of ``call``'s shape, the one its zero-copy rows name when that differs: the first row
        covering the size whose algorithm can serve the call, set up now, so that a captured call of the shape sets
        up nothing)."""
        if forced is not None:  # asked before its set-up: one that cannot serve the call sets up nothing
            why = self._build((call.collective, forced)).why_not(self.comm, call)
            if why is not None:
                raise InvalidUsageError(f"{call.collective} algorithm {forced!r} cannot serve this call: {why}")
            return self.get(call.collective, forced), None
        algo = self._first_able(call)
        if any(c == call.collective for c, _ in self._preferred):
            return algo, None
        for limit, name in self.table.get(call.collective + ZERO_COPY, ()):
            if call.message_bytes > limit:
                continue
            if name == algo.name:
                return algo, None
            candidate = self._candidate(call.collective, name)
            if candidate.why_not(self.comm, call) is not None:
                continue
            if candidate.zero_copy_kernel is None:  # a staged kernel beats zero-copy at this size
                return algo, None
            return algo, self.get(call.collective, name)
        return algo, None

    def _candidate(self, collective: str, name: str) -> Algorithm:
        """Algorithm ``name`` of ``collective``, built (not set up); a name not registered raises."""
        if self._factory(collective, name) is None:
            raise InvalidUsageError(f"the selection table names {collective} algorithm {name!r}, which "
                                    f"is not registered: choose from {self.names(collective)}")
        candidate = self._built.get((collective, name)) or self._factories[collective, name]()
        self._built[collective, name] = candidate
        return candidate

    def _first_able(self, call: Call) -> Algorithm:
        rows = self.table.get(call.collective, ())
        first = [n for c, n in self._preferred if c == call.collective]
        first += [n for limit, n in rows if call.message_bytes <= limit][:1]
        reasons = []
        for name in first + [n for n in self.names(call.collective) if n not in first]:
            candidate = self._candidate(call.collective, name)
            why = candidate.why_not(self.comm, call)
            if why is None:
                return self.get(call.collective, name)
            reasons.append(f"{name}: {why}")
        raise InvalidUsageError(f"no {call.collective} algorithm serves {call.message_bytes} bytes of {call.dtype} here ("
                                + "; ".join(reasons) + ")")

    def built(self) -> list[Algorithm]:
        """The algorithms set up on this communicator so far."""
        return [self._built[k] for k in self._ready]

    def close(self) -> None:
        """Close every algorithm that was set up."""
        for key in self._ready:
            self._built[key].close()
        self._ready.clear()
