"""``python -m pymscclpp.config``: every variable's effective value and where it came from (``--table``: README's
Markdown table). Exits 1 when a set value is refused."""

from __future__ import annotations

import argparse
import sys

from . import effective, table


def main(argv: list[str] | None = None) -> int:
    """Print the configuration (or the table); 1 when a value set in the environment is refused."""
    parser = argparse.ArgumentParser(prog="python -m pymscclpp.config", description=__doc__)
    parser.add_argument("--table", action="store_true", help="print the Markdown table of every variable")
    args = parser.parse_args(argv)
    if args.table:
        print(table())
        return 0
    rows = effective()
    width = max(len(name) for name, _, _ in rows)
    for name, value, source in rows:
        print(f"{name:<{width}}  {value}  ({source})")
    return 1 if any(source.startswith("environment, refused") for _, _, source in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
