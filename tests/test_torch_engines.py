"""SGLang's PyMscclppCommunicator and vLLM's CustomAllreduce shapes, called the way the engines call them, on the
simulator (CPU tensors; graph capture runs on GPUs in tests/gpu/run_torch.py)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch_ranks import run_ranks  # noqa: E402


def _sglang_shape(dist, rank: int, size: int) -> None:
    import torch
    from pymscclpp.torch import PyMscclppCommunicator
    # SGLang passes its CPU (gloo) group and its GPU
    comm = PyMscclppCommunicator(dist.group.WORLD, device=torch.get_default_device())
    x = torch.full((16,), rank + 1.0, dtype=torch.bfloat16)
    assert not comm.should_mscclpp_allreduce(x)  # disabled until the engine enables it (around graph capture)
    with comm.change_state(enable=True):
        assert comm.should_mscclpp_allreduce(x, dist.ReduceOp.SUM)
        declined = (torch.ones(4, dtype=torch.float64), torch.ones(4, 4)[:, ::2])
        assert not any(comm.should_mscclpp_allreduce(t) for t in declined)
        assert comm.should_mscclpp_allreduce(x, dist.ReduceOp.AVG)
        assert not comm.should_mscclpp_allreduce(x, dist.ReduceOp.BAND)
        assert comm.all_reduce(x, stream=None) is x
    assert comm.disabled and torch.equal(x, torch.full((16,), 3.0, dtype=torch.bfloat16))
    comm.destroy()
    assert not comm.available


def _vllm_shape(dist, rank: int, size: int) -> None:
    import torch
    from pymscclpp.torch import CustomAllreduce
    ca = CustomAllreduce(dist.group.WORLD, device=torch.get_default_device(), max_size=1024)
    x = torch.full((64,), rank + 1.0)
    assert ca.should_custom_ar(x) and not ca.should_custom_ar(torch.ones(256))  # 1024 bytes: not below max_size
    out = ca.custom_all_reduce(x)
    assert out is not x and torch.equal(out, torch.full((64,), 3.0)) and torch.equal(x, torch.full((64,), rank + 1.0))
    assert ca.custom_all_reduce(torch.ones(300)) is None  # the engine then uses its other all-reduce
    with ca.capture():
        assert torch.equal(ca.custom_all_reduce(x * 2), torch.full((64,), 6.0))
    ca.close()
    assert not ca.should_custom_ar(x) and ca.custom_all_reduce(x) is None


def _engine_shapes(dist, store, rank: int, size: int) -> None:
    import torch
    dist.init_process_group("gloo", store=store, rank=rank, world_size=size)
    _sglang_shape(dist, rank, size)
    _vllm_shape(dist, rank, size)
    from pymscclpp.torch import PyMscclppCommunicator
    group = dist.new_group(backend="mscclpp")
    shared = PyMscclppCommunicator(group, device=torch.get_default_device())
    assert shared.comm is group.comm  # an mscclpp group lends its own Communicator
    shared.destroy()
    dist.destroy_process_group()


def test_sglang_and_vllm_allreduce_classes_behave_as_the_engines_call_them():
    run_ranks(_engine_shapes)
