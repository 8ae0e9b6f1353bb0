"""Every public name of MSCCL++'s DSL exists in ``pymscclpp.language`` with the same parameters and defaults.

The manifest (``mscclpp_api.json``) holds MSCCL++'s names and parameter lists, extracted from its sources by
``mscclpp_api.py``; each entry is compared here with ``inspect.signature`` of ours.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import json
from pathlib import Path

import pytest

MANIFEST = json.loads(Path(__file__).with_name("mscclpp_api.json").read_text())

# MSCCL++ compiler plumbing that its DSL objects call on the program and that ours does differently (a
# program never calls it), and internals of its optimizer; everything else must match.
NOT_API = {
    "program.CollectiveProgram.add_channel", "program.CollectiveProgram.add_operation",
    "program.CollectiveProgram.add_semaphore", "program.CollectiveProgram.setup_channel",
    "program.CollectiveProgram.setup_remote_chunk", "program.CollectiveProgram.register_signal",
    "program.CollectiveProgram.register_wait", "program.CollectiveProgram.validate_signal_wait_pairing",
    "program.CollectiveProgram.post_process_operations",
    "program.CollectiveProgram.get_default_replication_policy_function",
    "program.CollectiveProgram.get_buffer_replication_policy_function", "loop.LoopIterationContext.add_operation",
    "internal.types.DataAccess", "internal.types.DataAccessType", "internal.types.RemoteBuffer",
    "internal.types.Instruction",  # its op-code enum: ours is the plan format's table, plan/opcodes.py
}


def _entries():
    for module, api in MANIFEST["modules"].items():
        for name, entry in api.items():
            yield module, name, entry


def _ours(module: str):
    return importlib.import_module("pymscclpp.language" + (f".{module}" if module else ""))


def _default(text: str | None, namespace: dict):
    if text is None:
        return inspect.Parameter.empty
    if text == "<factory>":
        return text
    return eval(text, namespace)  # noqa: S307 - defaults are literals and enum members from the manifest


def _params(fn, skip: int = 0) -> list[tuple[str, object]]:
    out = []
    for p in list(inspect.signature(fn).parameters.values())[skip:]:
        name = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "") + p.name
        out.append((name, p.default))
    return out


def _check_params(where: str, ours, want: list, namespace: dict, fields=None) -> list[str]:
    got = _params(ours)
    if fields is not None:  # a dataclass field with a default factory shows no default in the signature
        got = [(n, "<factory>" if f is not None and f.default_factory is not dataclass_missing() else d)
               for (n, d), f in zip(got, [fields.get(n) for n, _ in got])]
    expected = [(n, _default(d, namespace)) for n, d in want]
    if [n for n, _ in got] != [n for n, _ in expected]:
        return [f"{where}: parameters {[n for n, _ in got]}, MSCCL++ has {[n for n, _ in expected]}"]
    return [f"{where}: {n} defaults to {g!r}, MSCCL++ to {e!r}" for (n, g), (_, e) in zip(got, expected) if g != e]


def dataclass_missing():
    import dataclasses
    return dataclasses.MISSING


def _check_class(where: str, cls, entry: dict, namespace: dict) -> list[str]:
    import dataclasses
    problems = []
    if "members" in entry:
        if not issubclass(cls, enum.Enum):
            return [f"{where}: MSCCL++ has an Enum, ours is not one"]
        missing = [m for m in entry["members"] if m not in cls.__members__]
        return [f"{where}: enum members {missing} missing"] if missing else []
    if "init" in entry:
        fields = {f.name: f for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else None
        problems += _check_params(f"{where}()", cls, entry["init"], namespace, fields)
    for name, want in entry.get("methods", {}).items():
        if f"{where}.{name}" in NOT_API:
            continue
        method = getattr(cls, name, None)
        if method is None:
            problems.append(f"{where}.{name} is missing")
            continue
        static = isinstance(inspect.getattr_static(cls, name), (staticmethod, classmethod))
        problems += _check_params(f"{where}.{name}", method if static else _unbound(method), want, namespace)
    for name, nested in entry.get("classes", {}).items():
        inner = getattr(cls, name, None)
        problems += [f"{where}.{name} is missing"] if inner is None else _check_class(f"{where}.{name}", inner, nested, namespace)
    return problems


def _unbound(method):
    """A plain function's signature without ``self``."""
    sig = inspect.signature(method)
    params = list(sig.parameters.values())[1:]

    def stand_in(): ...
    stand_in.__signature__ = sig.replace(parameters=params)
    return stand_in


@pytest.mark.parametrize("module, name, entry", [e for e in _entries() if f"{e[0]}.{e[1]}" not in NOT_API],
                         ids=[f"{m or 'language'}.{n}" for m, n, _ in _entries() if f"{m}.{n}" not in NOT_API])
def test_mscclpp_name_exists_with_the_same_signature(module, name, entry):
    ours = _ours(module)
    obj = getattr(ours, name, None)
    assert obj is not None, f"pymscclpp.language{'.' + module if module else ''} has no {name}"
    where = f"{module or 'language'}.{name}"
    namespace = vars(ours)
    if entry["kind"] == "function":
        problems = _check_params(where, obj, entry["params"], namespace)
    else:
        assert inspect.isclass(obj), f"{where} is not a class"
        problems = _check_class(where, obj, entry, namespace)
    assert not problems, "\n".join(problems)


def test_manifest_covers_the_modules_programs_import():
    assert {"", "channel", "collectives", "general", "loop", "program", "rank", "thread_block_group",
            "utils"} <= set(MANIFEST["modules"]) | {""}
    assert "SwitchChannel" in MANIFEST["modules"]["channel"] and "SendRecv" in MANIFEST["modules"]["collectives"]
