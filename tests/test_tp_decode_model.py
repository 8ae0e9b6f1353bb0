"""The TP decode benchmark's model code (bench/tp_decode.py) on CPU tensors: shard shapes and all-reduce calls."""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

_SPEC = importlib.util.spec_from_file_location("tp_decode", Path(__file__).parent.parent / "bench" / "tp_decode.py")
tp_decode = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(tp_decode)

SMALL = types.SimpleNamespace(layers=2, hidden=64, intermediate=96, heads=8, kv_heads=2, head_dim=8)


@pytest.mark.parametrize("tp", [1, 2])
def test_decode_step_keeps_the_token_shape_and_all_reduces_twice_per_layer(tp):
    layers = tp_decode.make_layers(SMALL, tp, rank=0, device="cpu")
    assert layers[0]["qkv"].shape == (64, (8 * 8 + 2 * 2 * 8) // tp) and layers[0]["down"].shape == (96 // tp, 64)
    sizes = []
    x = torch.randn(3, 64).to(torch.bfloat16)
    out = tp_decode.decode_step(x, layers, SMALL, tp, lambda t: sizes.append(tuple(t.shape)))
    assert out.shape == (3, 64) and out.dtype == torch.bfloat16 and torch.isfinite(out.float()).all()
    assert sizes == [(3, 64)] * (2 * SMALL.layers)

