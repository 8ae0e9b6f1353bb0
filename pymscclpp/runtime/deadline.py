"""A wait budget (``Deadline``): the one clock of the host's waits (bootstrap, liveness, semaphores, transports,
abort)."""

from __future__ import annotations

import time

from ..errors import CommTimeoutError


class Deadline:
    """A wait budget started now: ``budget`` seconds, or no limit when ``budget`` is None; ``left``, when set, the
    part of ``budget`` still unspent by the waits that share it (a set-up's: ``Bootstrap.open_scope``)."""

    __slots__ = ("budget", "_at", "shared")

    def __init__(self, budget: float | None, left: float | None = None) -> None:
        self.budget = budget
        self.shared = left is not None
        self._at = None if budget is None else time.monotonic() + (budget if left is None else left)

    def remaining(self) -> float | None:
        """Seconds left (0 once past), or None without a limit."""
        return None if self._at is None else max(0.0, self._at - time.monotonic())

    def expired(self) -> bool:
        return self._at is not None and time.monotonic() >= self._at

    def error(self, rank: int, what: str) -> CommTimeoutError:
        """The timeout error of operation ``what`` on ``rank``."""
        if self.shared:
            return CommTimeoutError(f"rank {rank}: {what} timed out: this set-up's waits together used up its "
                                    f"{self.budget} s budget")
        return CommTimeoutError(f"rank {rank}: {what} timed out after {self.budget} s")
