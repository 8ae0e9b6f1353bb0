"""Reference interpreter of execution plans: every rank in one process, numpy buffers, race and deadlock checks.

It is the oracle the executor is tested against: ``run_plan`` gives outputs for given inputs, ``check_plan``
runs random inputs and compares them with the collective the plan declares.
"""

from .collectives import expected_outputs
from .errors import CollectiveMismatchError, DeadlockError, InterpreterError, RaceError
from .run import DTYPES, CheckReport, check_plan, resolve_dtype, run_plan

__all__ = ["DTYPES", "CheckReport", "CollectiveMismatchError", "DeadlockError", "InterpreterError", "RaceError",
           "check_plan", "expected_outputs", "resolve_dtype", "run_plan"]
