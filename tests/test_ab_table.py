"""The A/B table of bench/ab.sh (bench/ab_table.py) from floor-benchmark JSON files, without a GPU."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location("ab_table", Path(__file__).parent.parent / "bench" / "ab_table.py")
ab_table = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(ab_table)


def _write(folder: Path, stem: str, rows: list[tuple[int, float, float, int]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stem}.json").write_text(json.dumps(
        {"args": {}, "rows": [{"bytes": b, "us": us, "nccl_us": floor, "wrong": wrong} for b, us, floor, wrong in rows]}))


def test_the_table_puts_each_trees_time_and_floor_ratio_side_by_side_and_marks_wrong_sizes(tmp_path):
    _write(tmp_path / "before", "broadcast_np8_reg", [(1 << 20, 34.8, 4.46, 0), (16 << 20, 113.0, 69.3, 0)])
    _write(tmp_path / "after", "broadcast_np8_reg", [(1 << 20, 29.0, 4.40, 0), (16 << 20, 120.0, 70.0, 3)])
    _write(tmp_path / "after", "all_reduce_np8_reg", [(1 << 20, 25.0, 5.0, 0)])
    lines = ab_table.table(str(tmp_path), [str(tmp_path / "before"), str(tmp_path / "after") + "/"]).splitlines()
    assert lines[0] == "| run | bytes | before | after |"
    assert lines[2] == "| all_reduce_np8_reg | 1048576 | - | 25.0 us (5.00x) |"
    assert lines[3] == "| broadcast_np8_reg | 1048576 | 34.8 us (7.80x) | 29.0 us (6.59x) |"
    assert lines[4] == "| broadcast_np8_reg | 16777216 | 113.0 us (1.63x) | 120.0 us (1.71x) WRONG |"
    assert len(lines) == 5
