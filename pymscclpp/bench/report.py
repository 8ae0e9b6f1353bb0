"""The microbenchmarks' result: one JSON object, printed by rank 0 and written to ``--json`` when given."""

from __future__ import annotations

import json


def report(rank: int, res: dict, path: str | None) -> None:
    """Rank 0 prints ``res`` as indented JSON and writes it to ``path`` (None: print only)."""
    if rank != 0:
        return
    print(json.dumps(res, indent=1))
    if path:
        with open(path, "w") as f:
            json.dump(res, f, indent=1)
