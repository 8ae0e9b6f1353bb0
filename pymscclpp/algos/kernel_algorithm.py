"""A user's own algorithm from two functions, no subclass needed: ``setup(comm)`` builds state once (channels,
scratch, a ``runtime.launch.Launch``), ``launch(state, call)`` enqueues one call."""

from __future__ import annotations

from typing import Any, Callable

from .algorithm import ANY, Algorithm, Call, Constraint


class KernelAlgorithm(Algorithm):
    """``name`` for ``collective`` over messages of ``message_range`` bytes, under ``constraint``; reducing
    collectives serve ``dtypes`` with ``ops`` (default: every dtype and op the built-in reductions serve)."""

    def __init__(self, name: str, collective: str, setup: Callable[[Any], Any], launch: Callable[[Any, Call], None],
                 message_range: tuple = (0, float("inf")), buffer_mode: str = ANY,
                 constraint: Constraint = Constraint(), dtypes=None, ops=None):
        self.name, self.collective, self._setup, self._launch = name, collective, setup, launch
        self.message_range, self.buffer_mode, self.constraint = message_range, buffer_mode, constraint
        if dtypes is not None:
            self.dtypes = frozenset(dtypes)
        if ops is not None:
            self.ops = frozenset(ops)
        self.state = None

    def setup(self, comm) -> None:
        self.state = self._setup(comm)

    def launch(self, call: Call) -> None:
        self._launch(self.state, call)
