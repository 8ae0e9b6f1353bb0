"""The torch model examples on the simulator, each rank's result checked against a one-process reference:
examples/pipeline_mlp.py (a two-stage GPipe schedule, send/recv) and examples/moe_alltoall.py (a top-2
mixture-of-experts layer, experts spread over the ranks, uneven all_to_all_single), with no fallback."""

from __future__ import annotations

import importlib.util
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
