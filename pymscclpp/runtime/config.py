"""Settings read from the environment, validated once, with clear errors for bad values."""

from __future__ import annotations

import os

from ..errors import InvalidUsageError

DEFAULT_TIMEOUT_S = 120.0
MAX_TIMEOUT_S = 1e7  # ~4 months: budgets travel to the device as u64 nanoseconds


def timeout_s() -> float | None:
    """Budget of every host and device wait, from PYMSCCLPP_TIMEOUT_S; ``None`` when set to 0 (off)."""
    raw = os.environ.get("PYMSCCLPP_TIMEOUT_S", "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        raise InvalidUsageError(f"PYMSCCLPP_TIMEOUT_S={raw!r}: expected a number of seconds (0 turns waits' budgets off)") from None
    return checked_timeout_s(value, f"PYMSCCLPP_TIMEOUT_S={raw!r}")


def checked_timeout_s(value, where: str) -> float | None:
    """A budget in seconds from ``where`` (env var or argument), in [0, MAX_TIMEOUT_S]; ``None`` for 0 (off)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_TIMEOUT_S:
        raise InvalidUsageError(f"{where}: must be a number of seconds in [0, {MAX_TIMEOUT_S:g}] "
                                "(0 turns budgets off)")
    return None if value == 0 else float(value)


def call_check() -> bool:
    """Whether checked algorithms (one-shot, plans, user kernels) compare the ranks' call fingerprints:
    PYMSCCLPP_CHECK, 1 (default) or 0."""
    raw = os.environ.get("PYMSCCLPP_CHECK", "").strip() or "1"
    if raw not in ("0", "1"):
        raise InvalidUsageError(f"PYMSCCLPP_CHECK={raw!r}: expected 1 (check every call, the default) or 0 (off)")
    return raw == "1"


def graph_repeats() -> bool:
    """Whether a kernel launched again with unchanged arguments goes out as a one-node CUDA graph (cheaper on
    the host): PYMSCCLPP_GRAPH_REPEATS, 1 (default) or 0."""
    raw = os.environ.get("PYMSCCLPP_GRAPH_REPEATS", "").strip() or "1"
    if raw not in ("0", "1"):
        raise InvalidUsageError(f"PYMSCCLPP_GRAPH_REPEATS={raw!r}: expected 1 (the default) or 0 (off)")
    return raw == "1"
