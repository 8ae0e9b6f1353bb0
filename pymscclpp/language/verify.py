"""Check an execution plan with the reference interpreter: ``python -m pymscclpp.language.verify PLAN.json``.

Runs the plan for all ranks on random inputs (several back-to-back executions), checks every output against
the collective the plan declares, and reports races, deadlocks and wrong results naming rank, thread block
and op. Exits 0 with a one-line OK summary, 1 with the reason otherwise (2 for bad usage).
"""

from __future__ import annotations

import argparse
import sys

from .interpreter import DTYPES, InterpreterError, check_plan
from ..plan import PlanError, load_plan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pymscclpp.language.verify", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("plan", help="execution plan (JSON file)")
    parser.add_argument("--dtype", default="float32", choices=DTYPES, help="element type (default float32)")
    parser.add_argument("--size", type=int, help="message size in bytes (input size; output size for allgather)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the inputs and of the schedule")
    parser.add_argument("--executions", type=int, default=2, help="back-to-back executions to run (default 2)")
    parser.add_argument("--ranks-check", action="store_true",
                        help="also print one line per rank: thread blocks and ops")
    args = parser.parse_args(argv)
    if args.executions < 1:
        parser.error("--executions must be >= 1")
    try:
        plan = load_plan(args.plan)
        report = check_plan(plan, dtype=args.dtype, size=args.size, seed=args.seed, executions=args.executions)
    except OSError as e:
        print(f"FAIL: cannot read {args.plan}: {e.strerror or e}", file=sys.stderr)
        return 1
    except PlanError as e:
        print(f"FAIL: invalid plan: {e}", file=sys.stderr)
        return 1
    except InterpreterError as e:
        print(f"FAIL: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(report)
    if args.ranks_check:
        for gpu in plan.gpus:
            ops = sum(len(tb.ops) for tb in gpu.threadblocks)
            print(f"  rank {gpu.id}: {len(gpu.threadblocks)} thread blocks, {ops} ops, "
                  f"{gpu.input_chunks}/{gpu.output_chunks}/{gpu.scratch_chunks} input/output/scratch chunks: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
