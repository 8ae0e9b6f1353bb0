"""The executor: runs MSCCL++ execution plans with one generated kernel per plan and rank.

``ExecutionPlan.from_file(path)`` / ``from_json(text)`` load a plan; ``Executor(comm).execute(plan, sendbuf,
recvbuf, op="sum", stream=None)`` runs it, with a kernel generated for the plan and rank.
"""

from .executor import Executor, KernelStats, PreparedCall
from .plan import ExecutionPlan

__all__ = ["ExecutionPlan", "Executor", "KernelStats", "PreparedCall"]
