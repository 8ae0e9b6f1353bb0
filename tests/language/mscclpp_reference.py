"""Run MSCCL++'s own DSL test programs and reference plans through pymscclpp, and print a table.

    python tests/language/mscclpp_reference.py --mscclpp PATH [--ranks 4] [--no-executor] [--only WORD]

PATH is an MSCCL++ checkout (or ``git archive`` of one). Nothing of it is copied: its files are read from
PATH while this runs. For every program under ``python/mscclpp/language/tests/`` and
``test/executor-tests/algos/``:

- **DSL**: the program runs with MSCCL++'s own DSL (its pure-Python ``mscclpp.language`` from PATH) and with
  ours (imports changed to ``pymscclpp.language``); they *agree* when both emit the same plan (up to
  ``nop``s at the ends of a thread block, which our compiler drops) or both reject the program.
- **plan**: the plan MSCCL++'s DSL emitted, and each checked-in plan (``test/execution-files/``,
  ``test/executor-tests/execution-plans/``), goes through ``verify`` (the interpreter) and, when race-free,
  through the executor on the simulator, compared with the interpreter's outputs.

Not a CI test (MSCCL++'s files cannot be committed here); CI runs our own programs of the same features.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

import pymscclpp  # noqa: E402,F401  (chooses the backend before numba.cuda loads)
from pymscclpp.executor import ExecutionPlan  # noqa: E402
from pymscclpp.language.interpreter import InterpreterError, check_plan  # noqa: E402
from pymscclpp.language.interpreter.run import default_chunk_bytes  # noqa: E402
from pymscclpp.plan import PlanError, load_plan  # noqa: E402

PROGRAM_DIRS = ("python/mscclpp/language/tests", "test/executor-tests/algos")
PLAN_DIRS = ("test/execution-files", "test/executor-tests/execution-plans")


@dataclass
class Row:
    """One line of the table."""

    name: str
    dsl: str = ""
    plan: str = ""
    executor: str = ""
    notes: list[str] = field(default_factory=list)


def program_args(source: str, stem: str, ranks: int) -> list[str]:
    """Command-line arguments for a program, from the options its argparse parser declares."""
    values = {"--name": stem, "--num_gpus": ranks, "--gpus_per_node": max(1, ranks // 2), "--nnodes": 2,
              "--tbg_size": 2}
    declared = set(re.findall(r"add_argument\(\s*\"(--\w+)\"", source))
    return [str(x) for opt, v in values.items() if opt in declared for x in (opt, v)]


def run_program(path: Path, args: list[str], env: dict, timeout: float) -> tuple[dict | None, str]:
    """(plan, "") when the program printed a plan, else (None, the reason)."""
    try:
        proc = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True, env=env,
                              timeout=timeout, cwd=tempfile.gettempdir())
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:.0f} s"
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        return None, lines[-1] if lines else f"exit {proc.returncode}"
    text = proc.stdout[proc.stdout.find("{"):]
    try:
        return json.loads(text), ""
    except json.JSONDecodeError as e:
        return None, f"no plan on stdout ({e})"


def normalized(plan: dict) -> dict:
    """The plan without ``nop``s at the ends of each thread block (ours drops them, MSCCL++ keeps them)."""
    out = json.loads(json.dumps(plan))
    for gpu in out["gpus"]:
        for tb in gpu["threadblocks"]:
            ops = tb["ops"]
            while ops and ops[0]["name"] == "nop":
                ops.pop(0)
            while ops and ops[-1]["name"] == "nop":
                ops.pop()
    return out


def first_difference(a, b, path: str = "") -> str:
    """JSON path of the first place where ``a`` and ``b`` differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if a.get(k) != b.get(k):
                return first_difference(a.get(k), b.get(k), f"{path}.{k}" if path else k)
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return first_difference(x, y, f"{path}[{i}]")
    return f"{path}: {json.dumps(a)[:80]} vs ours {json.dumps(b)[:80]}"


def compare_dsl(ref: dict | None, ref_err: str, ours: dict | None, ours_err: str) -> tuple[str, str]:
    """(verdict, detail) of MSCCL++'s and our DSL on one program."""
    if ref is None and ours is None:
        return "agree (both reject)", f"MSCCL++: {ref_err[:100]} | ours: {ours_err[:100]}"
    if ref is None:
        return "DIFFER", f"MSCCL++ rejects ({ref_err[:120]}), ours emits a plan"
    if ours is None:
        return "DIFFER", f"ours rejects: {ours_err[:200]}"
    if ref == ours:
        return "agree", ""
    if normalized(ref) == normalized(ours):
        return "agree", "same up to nops at thread-block ends"
    return "DIFFER", first_difference(normalized(ref), normalized(ours))


def verify(plan_obj) -> tuple[str, bool]:
    """(verdict, race-free) of the interpreter on a plan."""
    try:
        plan = load_plan(plan_obj)
    except PlanError as e:
        return f"invalid: {e}"[:160], False
    try:
        report = check_plan(plan, executions=2)
    except InterpreterError as e:
        return f"{type(e).__name__}: {e}"[:220], False
    return ("OK" if report.checked else "OK (race/deadlock-free; no reference)"), True


class ExecutorRunner:
    """Runs plans through the executor on the simulator, one pool of rank processes per rank count."""

    def __init__(self) -> None:
        from rankpool import PoolCache
        self.dir = tempfile.mkdtemp(prefix="pymscclpp-mscclpp-reference-")
        self.pools = PoolCache(env={"PYMSCCLPP_TIMEOUT_S": "60", "PYMSCCLPP_CACHE_DIR": os.path.join(self.dir, "cache")})

    def run(self, plan_obj) -> str:
        from executor import cases, oracle
        try:
            xplan = ExecutionPlan.from_plan(plan_obj)
        except PlanError as e:
            return f"refused: {e}"[:200]
        plan = xplan.plan
        gpu = plan.gpus[0]
        parts = {"allreduce": 1, "allgather": 1, "reducescatter": plan.num_ranks, "alltoall": plan.num_ranks}
        in_parts = parts.get(plan.collective, gpu.input_chunks)
        chunks_per_part = gpu.input_chunks // in_parts if in_parts else (1 if gpu.output_chunks else 0)
        count = default_chunk_bytes(plan, None) * chunks_per_part // 4
        try:
            inputs = oracle.make_inputs(xplan, "float32", count, 7, 2)
            expected = oracle.expected_outputs(xplan, inputs, count, "sum")
            path = cases.write_case(os.path.join(self.dir, "case.pkl"), plan.to_json(), inputs, expected)
            start = time.monotonic()
            self.pools(plan.num_ranks).run(cases.run_case, path=path)
            return f"OK ({time.monotonic() - start:.0f} s)"
        except Exception as e:  # noqa: BLE001 - reported in the table
            stale = self.pools.pools.pop(plan.num_ranks, None)  # a failed case may have killed its pool
            if stale is not None:
                stale.close()
            lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
            return f"FAIL: {lines[-1] if lines else type(e).__name__}"[:220]

    def close(self) -> None:
        self.pools.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mscclpp", required=True, type=Path, help="MSCCL++ checkout (or extracted archive)")
    parser.add_argument("--ranks", type=int, default=4, help="ranks for programs that take a GPU count (default 4)")
    parser.add_argument("--no-executor", action="store_true", help="skip the executor runs")
    parser.add_argument("--no-dsl", action="store_true", help="skip running the programs through our DSL")
    parser.add_argument("--only", default="", help="only items whose path contains this")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per DSL program run")
    args = parser.parse_args(argv)
    root = args.mscclpp.resolve()
    if not (root / "python/mscclpp/language/program.py").is_file():
        parser.error(f"{root} has no python/mscclpp/language/program.py")

    shim = Path(tempfile.mkdtemp(prefix="mscclpp-dsl-"))  # MSCCL++'s pure-Python DSL without its native module
    (shim / "mscclpp").mkdir()
    (shim / "mscclpp/__init__.py").write_text("")
    (shim / "mscclpp/language").symlink_to(root / "python/mscclpp/language")
    ref_env = {**os.environ, "PYTHONPATH": str(shim)}
    our_env = {**os.environ, "PYTHONPATH": str(TESTS.parent), "PYMSCCLPP_BACKEND": "sim"}
    executor = None if args.no_executor else ExecutorRunner()

    rows: list[Row] = []
    plans: list[tuple[Row, dict]] = []
    programs = sorted(p for d in PROGRAM_DIRS for p in (root / d).rglob("*.py") if p.name != "__init__.py")
    for path in programs:
        rel = str(path.relative_to(root))
        if args.only not in rel:
            continue
        source = path.read_text()
        cli = program_args(source, path.stem, args.ranks)
        ref, ref_err = run_program(path, cli, ref_env, args.timeout)
        row = Row(rel, dsl="-")
        if not args.no_dsl:
            ours_path = shim / ("ours_" + path.name)
            ours_path.write_text(source.replace("mscclpp.language", "pymscclpp.language"))
            ours, ours_err = run_program(ours_path, cli, our_env, args.timeout)
            row.dsl, detail = compare_dsl(ref, ref_err, ours, ours_err)
            if detail:
                row.notes.append(detail)
        rows.append(row)
        if ref is not None:
            plans.append((row, ref))
        print(f"{rel}: {row.dsl}", file=sys.stderr, flush=True)
    for d in PLAN_DIRS:
        for path in sorted((root / d).glob("*.json")):
            rel = str(path.relative_to(root))
            if args.only in rel:
                row = Row(rel, dsl="")
                rows.append(row)
                plans.append((row, json.loads(path.read_text())))
    try:
        for row, plan in plans:
            row.plan, race_free = verify(plan)
            if executor is not None and race_free:
                row.executor = executor.run(plan)
            print(f"{row.name}: {row.plan} | {row.executor}", file=sys.stderr, flush=True)
    finally:
        if executor is not None:
            executor.close()
    print_table(rows, [r for r, _ in plans])
    return 0


def print_table(rows: list[Row], plan_rows: list[Row]) -> None:
    width = max(len(r.name) for r in rows) if rows else 10
    print(f"{'item':<{width}}  {'DSL (MSCCL++ vs ours)':<22}  {'verify':<40}  executor (simulator)")
    for r in rows:
        print(f"{r.name:<{width}}  {r.dsl:<22}  {r.plan[:40]:<40}  {r.executor}")
        for note in r.notes:
            print(f"{'':<{width}}    {note}")
        if len(r.plan) > 40:
            print(f"{'':<{width}}    verify: {r.plan}")
    dsl = [r for r in rows if r.dsl not in ("", "-")]
    agree = sum(r.dsl.startswith("agree") for r in dsl)
    ok = sum(r.plan.startswith("OK") for r in plan_rows)
    ran = sum(r.executor.startswith("OK") for r in plan_rows)
    print(f"\nDSL: {agree}/{len(dsl)} programs agree; plans: {ok}/{len(plan_rows)} verify race-free, "
          f"{ran}/{len(plan_rows)} run correctly through the executor ({ran}/{ok} of the race-free ones)")


if __name__ == "__main__":
    sys.exit(main())
