"""Cases passed in a GPU runner's log, as ``passed/total`` (``?`` when the log has no count): gpu.sh's matrix cell.

Reads the runners' own summary lines: ``N cases, F failed`` (run_cases, executor, NCCL API), the port
runner's JSON lines (``"ok": true``) and the soaks' ``soak: N all-reduces`` (``soak: N calls``).
"""

from __future__ import annotations

import json
import re
import sys

_CASES = re.compile(r"(\d+) cases, (\d+) failed")
_SOAK = re.compile(r"soak: (\d+ (?:all-reduces|calls)) .*every result exact")
_SOAK_PROGRESS = re.compile(r"^(\d+) (all-reduces|calls) ok")


def passed(text: str) -> str:
    """``passed/total`` from a runner's log text."""
    counts = [(int(n), int(f)) for n, f in _CASES.findall(text)]
    if counts:
        return f"{sum(n - f for n, f in counts)}/{sum(n for n, _ in counts)}"
    port = [json.loads(line) for line in text.splitlines() if line.startswith('{"phase"')]
    if port:
        return f"{sum(1 for row in port if row['ok'])}/{len(port)} run"
    soak = _SOAK.search(text)
    if soak:
        return soak.group(1)
    progress = [(int(m.group(1)), m.group(2)) for line in text.splitlines() if (m := _SOAK_PROGRESS.match(line))]
    return "{} {}, then stopped".format(*max(progress)) if progress else "?"


if __name__ == "__main__":
    with open(sys.argv[1], errors="replace") as f:
        print(passed(f.read()))
