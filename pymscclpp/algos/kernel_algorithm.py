"""A user's own algorithm from two functions, no subclass needed: ``setup(comm)`` builds state once (channels,
scratch, a ``runtime.launch.Launch``), ``launch(state, call)`` enqueues one call.

On one host (and with ``call_check``), each call first launches the call check's kernel on the call's stream:
the ranks compare call fingerprints, and a disagreement is recorded on every rank (``CallMismatchError``, sticky)
before the user's kernel starts. That kernel cannot be changed here: it runs anyway, unless it gates on the
verdict itself, testing ``callcheck.device.call_agreed(verdict)`` first (``verdict``: ``callcheck(comm).verdict``, taken
in ``setup``), as ``examples/custom_algorithm.py`` does.
"""

from __future__ import annotations

from typing import Any, Callable

from ..runtime.device_errors import OP_PRECHECK
from .algorithm import ANY, Algorithm, Call, Constraint
from ..callcheck.area import callcheck_on_one_host


class KernelAlgorithm(Algorithm):
    """``name`` for ``collective`` over messages of ``message_range`` bytes, under ``constraint``; reducing
    collectives serve ``dtypes`` with ``ops`` (default: every dtype and op the built-in reductions serve);
    ``call_check``: launch the call check's kernel ahead of each call (on one host, unless PYMSCCLPP_CHECK=0)."""

    def __init__(self, name: str, collective: str, setup: Callable[[Any], Any], launch: Callable[[Any, Call], None],
                 message_range: tuple = (0, float("inf")), buffer_mode: str = ANY,
                 constraint: Constraint = Constraint(), dtypes=None, ops=None, call_check: bool = True):
        self.name, self.collective, self._setup, self._launch = name, collective, setup, launch
        self.message_range, self.buffer_mode, self.constraint = message_range, buffer_mode, constraint
        if dtypes is not None:
            self.dtypes = frozenset(dtypes)
        if ops is not None:
            self.ops = frozenset(ops)
        self.call_check = call_check
        self.state = None
        self._check = self._check_launch = None

    def setup(self, comm) -> None:
        check = callcheck_on_one_host(comm) if self.call_check else None  # first: collective, as the user's may be
        if check is not None and check.enabled:
            self._check, self._check_launch = check, check.check_launch(OP_PRECHECK)
        self.state = self._setup(comm)

    def launch(self, call: Call) -> None:
        if self._check_launch is not None:
            self._check_launch.set_int("fingerprint", self._check.fingerprint(call))
            self._check_launch.launch(call.stream)
        self._launch(self.state, call)
