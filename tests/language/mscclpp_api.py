"""Extract the public API of MSCCL++'s DSL (names, parameter names and defaults) into a JSON manifest.

    python tests/language/mscclpp_api.py --mscclpp PATH [--out tests/language/mscclpp_api.json]

PATH is an MSCCL++ checkout. Its ``python/mscclpp/language`` sources are parsed with ``ast`` (never imported):
the package and its public submodules, and ``internal/types.py`` (the enums and value types programs use).
The manifest records facts about the API only: for each module, its public classes and functions; for a
class, its constructor's parameters, its public methods' parameters, nested classes and enum members.
``test_mscclpp_api.py`` compares ``pymscclpp.language`` against it with ``inspect.signature``.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
from pathlib import Path

MANIFEST = Path(__file__).with_name("mscclpp_api.json")
PRIVATE_MODULES = ("internal",)  # compiler internals, except the value types below
VALUE_TYPES = "internal/types.py"


def _params(fn: ast.FunctionDef, skip_first: bool) -> list[list]:
    """[name, default source or None] of each parameter; ``*name`` / ``**name`` for variadic ones."""
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + [ast.unparse(d) for d in a.defaults]
    out = [[p.arg, d] for p, d in zip(positional, defaults)]
    if skip_first and out:
        out = out[1:]
    if a.vararg:
        out.append(["*" + a.vararg.arg, None])
    out += [[p.arg, None if d is None else ast.unparse(d)] for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg:
        out.append(["**" + a.kwarg.arg, None])
    return out


def _is_static(fn: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)


def _dataclass_fields(cls: ast.ClassDef) -> list[list]:
    fields = []
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and not node.target.id.startswith("_"):
            if "ClassVar" in ast.unparse(node.annotation):
                continue
            default = None if node.value is None else ast.unparse(node.value)
            if default is not None and default.startswith("field("):
                default = "<factory>" if "default_factory" in default else default
            fields.append([node.target.id, default])
    return fields


def _class(cls: ast.ClassDef) -> dict:
    bases = [ast.unparse(b) for b in cls.bases]
    is_dataclass = any("dataclass" in ast.unparse(d) for d in cls.decorator_list)
    entry: dict = {"kind": "class"}
    methods: dict = {}
    nested: dict = {}
    for node in cls.body:
        if isinstance(node, ast.FunctionDef):
            if node.name == "__init__":
                entry["init"] = _params(node, skip_first=True)
            elif not node.name.startswith("_"):
                methods[node.name] = _params(node, skip_first=not _is_static(node))
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            nested[node.name] = _class(node)
    if "init" not in entry and is_dataclass:
        entry["init"] = _dataclass_fields(cls)
    if any(b.endswith("Enum") for b in bases):
        entry["members"] = [t.id for node in cls.body if isinstance(node, ast.Assign)
                            for t in node.targets if isinstance(t, ast.Name) and not t.id.startswith("_")]
        entry.pop("init", None)
    if methods:
        entry["methods"] = methods
    if nested:
        entry["classes"] = nested
    return entry


def module_api(source: str) -> dict:
    """Public classes and functions a module defines, with their signatures."""
    api = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            api[node.name] = _class(node)
        elif isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            api[node.name] = {"kind": "function", "params": _params(node, skip_first=False)}
    return api


def extract(root: Path) -> dict:
    """The manifest of the DSL under ``root/python/mscclpp/language``: module name -> its public API."""
    lang = root / "python/mscclpp/language"
    modules = {}
    for path in sorted(lang.rglob("*.py")):
        rel = path.relative_to(lang).as_posix()
        if rel.startswith("tests/") or (rel.split("/")[0] in PRIVATE_MODULES and rel != VALUE_TYPES):
            continue
        name = rel[:-3].replace("/", ".")
        name = "" if name == "__init__" else name
        api = module_api(path.read_text())
        if api:
            modules[name] = api
    return modules


def source_commit(root: Path) -> str:
    out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mscclpp", required=True, type=Path, help="MSCCL++ checkout")
    parser.add_argument("--commit", help="commit the sources are from (default: git rev-parse HEAD in PATH)")
    parser.add_argument("--out", type=Path, default=MANIFEST)
    args = parser.parse_args()
    manifest = {"source": "microsoft/mscclpp python/mscclpp/language", "commit": args.commit or source_commit(args.mscclpp),
                "modules": extract(args.mscclpp)}
    args.out.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out}: {sum(len(m) for m in manifest['modules'].values())} names in {len(manifest['modules'])} modules")


if __name__ == "__main__":
    main()
