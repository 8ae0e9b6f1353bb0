"""The torch model examples on the simulator, each rank's result checked against a one-process reference:
examples/pipeline_mlp.py (a two-stage GPipe schedule, send/recv) and examples/moe_alltoall.py (a top-2
mixture-of-experts layer, experts spread over the ranks, uneven all_to_all_single), with no fallback."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from torch_ranks import run_ranks  # noqa: E402

_EXAMPLES = Path(__file__).parent.parent / "examples"
_NO_FALLBACK = {"PYMSCCLPP_TORCH_FALLBACK": "none", "PYMSCCLPP_TIMEOUT_S": "60"}


def _example(name: str):
    spec = importlib.util.spec_from_file_location(name, _EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _compare(dist, store, rank: int, size: int, name: str, argv: list) -> tuple:
    example = _example(name)
    dist.init_process_group("mscclpp", store=store, rank=rank, world_size=size)
    result = example.compare(example.parse_args(argv))
    dist.destroy_process_group()
    return result


def _pipeline(dist, store, rank: int, size: int) -> tuple:
    return _compare(dist, store, rank, size, "pipeline_mlp", ["--width", "16", "--batch", "8"])


def test_two_stage_pipeline_matches_the_one_process_model():
    reports = run_ranks(_pipeline, env=_NO_FALLBACK)
    for ok, report in reports:
        assert ok and report.endswith("OK"), report
    assert "stage 1: " in reports[1][1] and "checks over 4 microbatches" in reports[1][1]


def _moe(dist, store, rank: int, size: int) -> tuple:
    return _compare(dist, store, rank, size, "moe_alltoall", ["--tokens", "24", "--model", "8", "--hidden", "16"])


def test_expert_parallel_top2_moe_layer_matches_the_one_process_layer():
    reports = run_ranks(_moe, size=3, env=_NO_FALLBACK)
    for ok, report in reports:
        assert ok and report.endswith("OK"), report
    sent = [json.loads(report.split("rows sent per rank ")[1].split("]")[0] + "]") for _, report in reports]
    assert all(sum(rows) == 2 * 24 for rows in sent), sent  # two choices per token
    assert len({n for rows in sent for n in rows}) > 1, sent  # uneven
