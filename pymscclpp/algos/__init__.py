"""Collective algorithms behind one interface: hand-written one-shot kernels, execution plans, and the user's
own, in a per-communicator collection that picks one per call (``docs/algorithms.md``)."""

from .algorithm import ANY, IN_PLACE, OUT_OF_PLACE, Algorithm, Call, CallBuffer, Constraint
from .collection import AlgorithmCollection
from .kernel_algorithm import KernelAlgorithm
from .plan_algorithm import PlanAlgorithm

__all__ = ["ANY", "IN_PLACE", "OUT_OF_PLACE", "Algorithm", "AlgorithmCollection", "Call", "Constraint",
           "KernelAlgorithm", "PlanAlgorithm"]
