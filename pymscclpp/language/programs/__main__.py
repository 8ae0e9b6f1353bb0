"""Print a library program's execution plan: ``python -m pymscclpp.language.programs NAME --ranks N``."""

from __future__ import annotations

import argparse
import inspect
import json
import sys

from . import PROGRAMS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pymscclpp.language.programs", description=__doc__)
    parser.add_argument("name", choices=sorted(PROGRAMS))
    parser.add_argument("--ranks", type=int, required=True, help="number of ranks (>= 2)")
    parser.add_argument("--protocol", choices=("simple", "packet", "Simple", "LL"),
                        help="protocol, for programs that offer both (LL and Simple: the plan format's names)")
    parser.add_argument("--instances", type=int, default=1)
    parser.add_argument("--chunk-factor", type=int, default=1)
    parser.add_argument("--inplace", action="store_true", help="in-place variant, for programs that offer one")
    parser.add_argument("--no-fusion", action="store_true", help="compile without instruction fusion")
    args = parser.parse_args(argv)
    build = PROGRAMS[args.name]
    accepted = inspect.signature(build).parameters
    kwargs = {"instances": args.instances, "chunk_factor": args.chunk_factor, "instr_fusion": not args.no_fusion}
    for flag, value in (("protocol", args.protocol), ("inplace", args.inplace or None)):
        if value is not None:
            if flag not in accepted:
                parser.error(f"{args.name} has no --{flag} option")
            kwargs[flag] = value
    try:
        plan = build(args.ranks, **kwargs)
    except ValueError as e:
        parser.error(str(e))
    json.dump(plan, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
