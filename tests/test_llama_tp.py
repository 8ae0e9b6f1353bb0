"""examples/llama_tp.py on the simulator: a transformers Llama, tensor parallel over 2 ranks on the mscclpp
backend, decodes the unsharded model's tokens (few tokens here; 32 and a CUDA graph on GPUs)."""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from torch_ranks import run_ranks  # noqa: E402

_EXAMPLE = Path(__file__).parent.parent / "examples" / "llama_tp.py"


def _decode(dist, store, rank: int, size: int) -> tuple:
    spec = importlib.util.spec_from_file_location("llama_tp", _EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    dist.init_process_group("mscclpp", store=store, rank=rank, world_size=size)
    args = types.SimpleNamespace(tokens=4, layers=1, hidden=64, bf16_tol=0.05)
    result = example.compare(args)
    dist.destroy_process_group()
    return result


def test_tensor_parallel_llama_decodes_the_unsharded_models_tokens():
    for ok, report in run_ranks(_decode):
        assert ok, report
