"""``JSON()``: compile the active program into its execution plan."""

from __future__ import annotations

from .internal.globals import get_program


def JSON() -> str:
    """The active program's execution plan as a JSON string (MSCCL++ format)."""
    return get_program().to_json()
