"""Errors the interpreter reports; each names rank, thread block and op."""


class InterpreterError(RuntimeError):
    """A plan did not execute correctly."""


class RaceError(InterpreterError):
    """Two unsynchronized accesses touch the same bytes and at least one writes."""


class DeadlockError(InterpreterError):
    """No thread block can make progress: a wait, packet read, barrier or semaphore is never satisfied."""


class CollectiveMismatchError(InterpreterError):
    """The plan ran cleanly but its outputs are not the collective it declares."""
