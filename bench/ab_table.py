"""The A/B table of ``bench/ab.sh``: per collective and size, each tree's time and ratio to the floor of the same
run (the slowest rank's median), and any size a tree got wrong.

    python3 bench/ab_table.py OUTDIR TREE...
"""

from __future__ import annotations

import glob
import json
import os
import sys


def rows_by_op(folder: str) -> dict[str, dict[int, dict]]:
    """The floor benchmark's rows under ``folder``: {file stem: {bytes: row}}."""
    found = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        with open(path) as f:
            found[os.path.basename(path)[:-5]] = {row["bytes"]: row for row in json.load(f)["rows"]}
    return found


def cell(row: dict | None) -> str:
    """``12.3 us (2.10x)``, the ratio time / floor; ``WRONG`` where the result was; ``-`` where there is none."""
    if row is None:
        return "-"
    text = f"{row['us']:.1f} us ({row['us'] / row['nccl_us']:.2f}x)"
    return text + (" WRONG" if row["wrong"] else "")


def table(out: str, trees: list[str]) -> str:
    """The markdown table of every collective's sizes, a column per tree."""
    names = [os.path.basename(os.path.normpath(t)) for t in trees]
    runs = {name: rows_by_op(os.path.join(out, name)) for name in names}
    lines = [f"| run | bytes | {' | '.join(names)} |", "|---|---|" + "---|" * len(names)]
    for stem in sorted({stem for rows in runs.values() for stem in rows}):
        sizes = sorted({size for rows in runs.values() for size in rows.get(stem, {})})
        for size in sizes:
            cells = [cell(runs[name].get(stem, {}).get(size)) for name in names]
            lines.append(f"| {stem} | {size} | {' | '.join(cells)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: python3 bench/ab_table.py OUTDIR TREE...")
    print(table(sys.argv[1], sys.argv[2:]))
