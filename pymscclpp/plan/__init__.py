"""The execution-plan format (MSCCL++ v0.8 JSON): dataclasses, loader, op codes and buffer layout.

The bottom of the plan side: the DSL writes plans, the interpreter checks them and the executor runs them;
this package imports nothing else of pymscclpp.
"""

from .loader import load_plan
from .model import BufferRef, Gpu, Op, Plan, PlanError, RemoteBuffer, SwitchChannel, ThreadBlock

__all__ = ["BufferRef", "Gpu", "Op", "Plan", "PlanError", "RemoteBuffer", "SwitchChannel", "ThreadBlock", "load_plan"]
