"""The program that DSL calls add to: set by ``CollectiveProgram.__enter__``, cleared on exit."""

from __future__ import annotations

from typing import Any

_program: Any = None


def set_program(program: Any) -> None:
    global _program
    _program = program


def get_program() -> Any:
    """The active ``CollectiveProgram``; DSL calls outside a ``with CollectiveProgram(...)`` block fail here."""
    if _program is None:
        raise RuntimeError("no active CollectiveProgram: DSL calls must run inside `with CollectiveProgram(...):`")
    return _program
