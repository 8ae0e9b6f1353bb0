"""An execution plan (a DSL program's output or an MSCCL++ plan file) as an Algorithm, run by the communicator's
executor: the same selection, tuning and registration as the hand-written kernels. On one host, every call's
kernel first compares the ranks' call fingerprints (``callcheck``).
"""

from __future__ import annotations

from ..executor import ExecutionPlan, Executor
from .algorithm import ANY, Algorithm, Call, Constraint
from ..callcheck.area import callcheck_on_one_host
from ..runtime.collectives import FROM_PLAN


def executor_of(comm) -> Executor:
    """The communicator's executor (one per communicator, closed with it), with its call check on one host."""
    return comm.extension("executor", lambda c: Executor(c, call_check=callcheck_on_one_host(c)))


class PlanAlgorithm(Algorithm):
    """``plan`` (anything ``ExecutionPlan.from_plan`` takes) serving its collective for its ranks and message
    range; ``name`` defaults to the plan's."""

    buffer_mode = ANY  # the executor stages user buffers a plan cannot use as they are

    def __init__(self, plan, name: str | None = None, collective: str | None = None):
        self.xplan = ExecutionPlan.from_plan(plan)
        p = self.xplan.plan
        self.name = name or p.name
        self.collective = collective or FROM_PLAN.get(p.collective, p.collective)
        self.message_range = (p.min_message_size, p.max_message_size)
        self.constraint = Constraint(world_size=self.xplan.num_ranks)
        self._executor: Executor | None = None

    @staticmethod
    def collective_of(plan: dict) -> str:
        """The Collective API's name of the collective a plan (its dict) serves."""
        return FROM_PLAN.get(plan["collective"], plan["collective"])

    def why_not(self, comm, call: Call) -> str | None:
        why = super().why_not(comm, call)
        if why is None:
            far = [p for p in self.xplan.peers(comm.rank) if p not in comm.peer_pools]
            if far:
                why = f"has memory channels to ranks {far} on other hosts"
        return why

    def setup(self, comm) -> None:
        self._executor = executor_of(comm)

    def launch(self, call: Call) -> None:
        check = self._executor.call_check
        self._executor.execute(self.xplan, call.sendbuf, call.recvbuf, op=call.op, stream=call.stream,
                               fingerprint=check.fingerprint(call) if check is not None else 0)
