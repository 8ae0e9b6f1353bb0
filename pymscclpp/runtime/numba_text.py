"""Keep numba's messages plain text: with colorama installed it wraps error and warning text in ANSI codes
and, once it has coloured anything, writes a colour reset to stdout when the process exits."""

from __future__ import annotations

import os
import sys

_ENV = "NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING"
_ERRORS = ("numba.core.errors", "numba.cuda.core.errors")


class PlainScheme:
    """numba's colour-scheme interface, handing every text back unchanged."""

    def code(self, msg: str) -> str:
        return msg

    errmsg = filename = indicate = highlight = reset = code


def install() -> None:
    """Turn numba's highlighting off, before numba loads (the environment) or after (its scheme object)."""
    os.environ.setdefault(_ENV, "1")
    for name in _ERRORS:
        errors = sys.modules.get(name)
        if errors is not None and hasattr(errors, "HighlightColorScheme"):
            errors._termcolor_inst = PlainScheme()
