"""Collectives across hosts, as the Communicator serves them: the DSL's host-layout plans (``plan_for``:
hierarchical all-reduce over memory channels within a host and port channels between hosts, flat port-channel
plans otherwise) run by the communicator's executor, one plan per root for broadcast; every call checked on the
host first (``callcheck.hosts``).
"""

from __future__ import annotations

from .algorithm import Algorithm, Call, Constraint
from ..callcheck.hosts import HostCallCheck
from .plan_algorithm import PlanAlgorithm
from ..runtime.collectives import PLAN_NAMES


class CrossHost(Algorithm):
    """``collective`` for ranks spanning two or more hosts, with the ``protocol`` of its plans (``simple``
    for any size, ``packet`` for small messages)."""

    def __init__(self, name: str, collective: str, protocol: str = "simple", max_bytes: float = float("inf")):
        self.name, self.collective, self.protocol = name, collective, protocol
        self.message_range = (0, max_bytes)
        self._plans: dict[int, PlanAlgorithm] = {}
        self._comm = None
        self._check: HostCallCheck | None = None

    def why_not(self, comm, call: Call) -> str | None:
        if len(set(comm.host_ids)) < 2:
            return "serves ranks on two or more hosts (these are all on one)"
        return super().why_not(comm, call)

    constraint = Constraint()

    def setup(self, comm) -> None:
        self._comm = comm
        self._check = comm.extension("host_callcheck", HostCallCheck)

    def _plan(self, root: int) -> PlanAlgorithm:
        """The plan for ``root`` (every rank asks for it in the same call: its set-up is collective)."""
        plan = self._plans.get(root)
        if plan is None:
            from ..language.programs.hierarchical import plan_for
            plan = PlanAlgorithm(plan_for(PLAN_NAMES[self.collective], self._comm.host_ids, self.protocol,
                                          root=root), name=self.name, collective=self.collective)
            plan.setup(self._comm)
            self._plans[root] = plan
        return plan

    def launch(self, call: Call) -> None:
        self._check.check(call)  # first: ranks whose calls differ would set up different plans
        self._plan(call.root if self.collective == "broadcast" else 0).launch(call)
