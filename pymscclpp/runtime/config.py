"""Settings read from the environment, validated once, with clear errors for bad values."""

from __future__ import annotations

import os

from ..errors import InvalidUsageError

DEFAULT_TIMEOUT_S = 120.0


def timeout_s() -> float | None:
    """Budget of every host and device wait, from PYMSCCLPP_TIMEOUT_S; ``None`` when set to 0 (off)."""
    raw = os.environ.get("PYMSCCLPP_TIMEOUT_S", "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        raise InvalidUsageError(f"PYMSCCLPP_TIMEOUT_S={raw!r}: expected a number of seconds (0 turns waits' budgets off)") from None
    if value < 0 or value != value:
        raise InvalidUsageError(f"PYMSCCLPP_TIMEOUT_S={raw!r}: must be >= 0")
    return None if value == 0 else value
