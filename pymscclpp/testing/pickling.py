"""Pickling of the functions a test sends to its ranks: by reference where it can, by value (code, closure and
defaults, in the globals of the function's module) for lambdas and functions defined inside other functions."""

from __future__ import annotations

import importlib
import io
import marshal
import pickle
import types
from typing import Any


def _function(code: bytes, module: str, name: str, defaults: tuple | None, kwdefaults: dict | None,
              cells: tuple) -> types.FunctionType:
    fn = types.FunctionType(marshal.loads(code), importlib.import_module(module).__dict__, name, defaults,
                            tuple(types.CellType(c) for c in cells) or None)
    fn.__kwdefaults__ = kwdefaults
    return fn


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: object) -> Any:
        if isinstance(obj, types.FunctionType) and ("<locals>" in obj.__qualname__ or obj.__name__ == "<lambda>"):
            cells = tuple(c.cell_contents for c in obj.__closure__ or ())
            return _function, (marshal.dumps(obj.__code__), obj.__module__, obj.__name__, obj.__defaults__,
                               obj.__kwdefaults__, cells)
        return NotImplemented


def dumps(obj: object) -> bytes:
    """``pickle.dumps(obj)``, with local functions and lambdas anywhere inside ``obj`` sent by value."""
    out = io.BytesIO()
    _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return out.getvalue()
