"""The "mscclpp" torch.distributed backend on the simulator: CPU tensors stand in for CUDA ones, two rank
processes share a TCPStore; torch itself stays optional."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from torch_ranks import run_ranks as _run  # noqa: E402


def _init(dist, store, rank: int, size: int) -> None:
    dist.init_process_group("mscclpp", store=store, rank=rank, world_size=size)


def _served_collectives(dist, store, rank: int, size: int) -> None:
    import torch
    _init(dist, store, rank, size)
    assert dist.get_backend() == "mscclpp"
    x = torch.arange(12, dtype=torch.float32) + 100 * rank
    want = sum(torch.arange(12, dtype=torch.float32) + 100 * r for r in range(size))
    dist.all_reduce(x)
    assert torch.equal(x, want)
    top = torch.arange(12.0) + 100 * (size - 1)
    for op, want in ((dist.ReduceOp.MIN, torch.arange(12.0)), (dist.ReduceOp.MAX, top)):
        y = torch.arange(12, dtype=torch.float32) + 100 * rank
        dist.all_reduce(y, op=op)
        assert torch.equal(y, want), (op, y)
    z = torch.full((8,), rank + 2, dtype=torch.int32)
    work = dist.all_reduce(z, op=dist.ReduceOp.PRODUCT, async_op=True)
    assert work.wait() and work.is_completed() and work.is_success() and work.exception() is None
    assert torch.equal(z, torch.full((8,), 6, dtype=torch.int32))
    assert work.result() == [z] and work.get_future().wait() == [z]
    b = torch.full((4, 16), 0.5 * (rank + 1), dtype=torch.bfloat16)
    dist.all_reduce(b)
    assert torch.equal(b, torch.full((4, 16), 1.5, dtype=torch.bfloat16))

    gathered = torch.zeros(size * 6, dtype=torch.float16)
    dist.all_gather_into_tensor(gathered, torch.full((6,), float(rank), dtype=torch.float16))
    assert torch.equal(gathered, torch.arange(size, dtype=torch.float16).repeat_interleave(6))

    mine = torch.empty(5, dtype=torch.float32)
    dist.reduce_scatter_tensor(mine, torch.arange(size * 5, dtype=torch.float32) * (rank + 1))
    assert torch.equal(mine, torch.arange(rank * 5, rank * 5 + 5, dtype=torch.float32) * 3)
    dist.reduce_scatter_tensor(mine, torch.arange(size * 5, dtype=torch.float32) * (rank + 1), op=dist.ReduceOp.MAX)
    assert torch.equal(mine, torch.arange(rank * 5, rank * 5 + 5, dtype=torch.float32) * 2)

    c = torch.full((7,), float(rank))
    dist.broadcast(c, src=1)
    assert torch.equal(c, torch.ones(7))

    send = torch.arange(size * 3, dtype=torch.int32) + 10 * rank
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    assert torch.equal(recv, torch.cat([torch.arange(rank * 3, rank * 3 + 3, dtype=torch.int32) + 10 * r
                                        for r in range(size)]))
    recv.zero_()
    dist.all_to_all_single(recv, send, [3] * size, [3] * size)
    assert torch.equal(recv[3:6], torch.arange(rank * 3, rank * 3 + 3, dtype=torch.int32) + 10)
    _list_and_rooted_collectives(dist, rank, size)
    dist.destroy_process_group()


def _list_and_rooted_collectives(dist, rank: int, size: int) -> None:
    """all_gather and reduce_scatter of lists, scatter, gather, barrier, and async all_gather_into_tensor."""
    import torch
    parts = [torch.zeros(2, 3) for _ in range(size)]
    dist.all_gather(parts, torch.full((2, 3), float(rank)))
    assert all(torch.equal(p, torch.full((2, 3), float(r))) for r, p in enumerate(parts))
    out = torch.zeros(4, dtype=torch.bfloat16)
    dist.reduce_scatter(out, [torch.full((4,), float(r + rank), dtype=torch.bfloat16) for r in range(size)])
    assert torch.equal(out, torch.full((4,), float(sum(rank + r for r in range(size))), dtype=torch.bfloat16))
    mine = torch.zeros(3)
    dist.scatter(mine, [torch.full((3,), 7.0 + r) for r in range(size)] if rank == 1 else None, src=1)
    assert torch.equal(mine, torch.full((3,), 7.0 + rank))
    gathered = [torch.zeros(2, dtype=torch.int32) for _ in range(size)] if rank == 0 else None
    dist.gather(torch.full((2,), rank + 5, dtype=torch.int32), gathered, dst=0)
    if rank == 0:
        assert [g.tolist() for g in gathered] == [[r + 5] * 2 for r in range(size)]
    dist.barrier()
    flat = torch.zeros(size * 4)
    work = dist.all_gather_into_tensor(flat, torch.full((4,), rank + 1.0), async_op=True)
    work.wait()
    assert torch.equal(flat, torch.arange(1.0, size + 1).repeat_interleave(4))


def test_backend_serves_every_claimed_collective_on_pymscclpp():
    _run(_served_collectives)  # the simulator has no fallback: a forwarded call would raise


def _unserved_calls(dist, store, rank: int, size: int) -> dict:
    import torch
    from pymscclpp.errors import InvalidUsageError
    _init(dist, store, rank, size)
    calls = {"any source": lambda: dist.recv(torch.ones(2)),
             "band": lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32), op=dist.ReduceOp.BAND),
             "float64": lambda: dist.all_reduce(torch.ones(4, dtype=torch.float64)),
             "non-contiguous": lambda: dist.all_reduce(torch.ones(4, 4)[:, ::2])}
    messages = {}
    for name, call in calls.items():
        try:
            call()
        except InvalidUsageError as exc:
            messages[name] = str(exc)
        else:
            raise AssertionError(f"{name}: no error")
    dist.destroy_process_group()
    return messages


def test_backend_unserved_calls_raise_clear_error_without_nccl():
    for messages in _run(_unserved_calls):
        for name in ("band", "float64"):
            assert messages[name].startswith("pymscclpp does not serve") and "simulator" in messages[name], messages[name]
        assert "torch.distributed all_reduce" in messages["band"] and "SUM, MIN, MAX, PRODUCT, AVG" in messages["band"]
        assert "float32" in messages["float64"] and "receives only from a named rank" in messages["any source"]
        assert "not contiguous" in messages["non-contiguous"]


def _forwarded_calls(dist, store, rank: int, size: int) -> None:
    import torch
    for _ in range(2):  # destroyed and initialized again on the same store
        _init(dist, store, rank, size)
        dist.barrier()
        t = torch.full((3,), float(rank), dtype=torch.float64)
        dist.all_reduce(t)
        assert torch.equal(t, torch.full((3,), 1.0, dtype=torch.float64))
        if rank == 0:  # served by pymscclpp, between forwarded calls
            dist.send(torch.arange(4.0), dst=1)
        else:
            got = torch.zeros(4)
            dist.recv(got, src=0)
            assert torch.equal(got, torch.arange(4.0))
        flags = torch.tensor([3 + rank, 5], dtype=torch.int32)
        dist.all_reduce(flags, op=dist.ReduceOp.BAND)
        assert flags.tolist() == [3 & 4, 5]
        wide = torch.full((2,), rank + 1.0, dtype=torch.float64)
        dist.reduce(wide, dst=1)
        assert rank == 0 or wide.tolist() == [3.0, 3.0]  # gloo uses the others' tensors as scratch
        served = torch.ones(5)
        dist.all_reduce(served)
        assert torch.equal(served, torch.full((5,), 2.0))
        dist.destroy_process_group()


def test_backend_forwards_other_calls_to_fallback_group_and_reinitializes():
    _run(_forwarded_calls, env={"PYMSCCLPP_TORCH_FALLBACK": "gloo"})


def test_reduce_op_name_answers_reduce_ops_their_types_and_none_alike_and_refuses_the_rest():
    import torch.distributed as dist
    from pymscclpp.torch.ops import reduce_op_name
    r = dist.ReduceOp
    for op, name in ((None, "sum"), (r.SUM, "sum"), (r.MIN, "min"), (r.MAX, "max"), (r.PRODUCT, "prod"),
                     (r.AVG, "avg"), (r.BAND, None), (dist._make_nccl_premul_sum(2.0), None)):
        opts = dist.AllreduceOptions()
        if op is not None:
            opts.reduceOp = op
        for _ in range(2):  # the second answer comes from the cache
            assert reduce_op_name(torch.bfloat16, op) == name and reduce_op_name(torch.float32, opts.reduceOp) == name
            assert reduce_op_name(torch.int64, opts.reduceOp) is None and reduce_op_name(torch.complex64, op) is None


def test_a_synchronous_call_gets_no_work_and_an_asynchronous_one_a_finished_work():
    import torch.distributed as dist
    from pymscclpp.torch.work import FinishedWork, finished
    t = torch.ones(3)
    opts = dist.AllreduceOptions()
    assert isinstance(finished([t], opts), FinishedWork) and isinstance(finished([t], None), FinishedWork)
    if hasattr(opts, "asyncOp"):  # torch 2.7 on: dist.all_reduce(async_op=False) skips waiting on None
        opts.asyncOp = False
        assert finished([t], opts) is None


def test_pymscclpp_imports_without_torch_and_pymscclpp_torch_names_the_extra():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import pymscclpp; assert pymscclpp.Communicator\n"
            "try:\n    import pymscclpp.torch\nexcept ImportError as exc:\n    print(exc)\n"
            "assert not any(m == 'torch' or m.startswith('torch.') for m in sys.modules if sys.modules[m])\n")
    env = {**os.environ, "PYMSCCLPP_BACKEND": "sim"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "pymscclpp[torch]" in done.stdout


def _repeats_after_in_place_changes(dist, store, rank: int, size: int) -> None:
    import torch
    from pymscclpp.errors import InvalidUsageError
    _init(dist, store, rank, size)
    comm = dist.group.WORLD.comm
    x = torch.ones(4, 6)
    for _ in range(3):  # the same tensor object again and again: the repeat path
        x.fill_(rank + 1)
        comm.all_reduce(x)
    assert torch.equal(x, torch.full((4, 6), 3.0))
    x.t_()  # the same object, no longer contiguous
    try:
        comm.all_reduce(x)
        raise AssertionError("a tensor made non-contiguous in place was reduced")
    except InvalidUsageError as exc:
        assert "contiguous" in str(exc)
    x.t_()
    x.resize_(5)  # fewer elements, same address
    x.fill_(rank + 1)
    comm.all_reduce(x)
    assert torch.equal(x, torch.full((5,), 3.0))
    selections = []
    choice = comm.algorithms.choice
    comm.algorithms.choice = lambda *args, **kwargs: selections.append(args) or choice(*args, **kwargs)
    y = torch.zeros(8)
    for i in range(3):  # a new tensor object each time, at the same address: repeated without a new selection
        v = y.view(2, 4)
        v.fill_(rank + i)
        comm.all_reduce(v)
        assert torch.equal(v, torch.full((2, 4), float(sum(r + i for r in range(size)))))
    assert len(selections) == 1
    comm.algorithms.choice = choice
    from pymscclpp.algos import KernelAlgorithm
    z = torch.ones(3)
    comm.all_reduce(z)
    comm.all_reduce(z)
    served = []
    comm.register_algorithm(KernelAlgorithm("mine", "all_reduce", lambda c: None,
                                            lambda state, call: served.append(call.peer_bytes), call_check=False))
    comm.all_reduce(z)  # the same object, and a new view: repeated before, but an algorithm preferred since
    comm.all_reduce(y.view(2, 4))  # serves them
    assert served == [12, 32]
    head, out = x[:2], torch.zeros(2 * size)
    comm.all_gather(head, out)
    out.resize_(3)
    try:
        comm.all_gather(head, out)
        raise AssertionError("an all_gather output shrunk in place was written")
    except InvalidUsageError as exc:
        assert "receive buffer" in str(exc)
    dist.destroy_process_group()


def test_a_repeated_call_is_checked_anew_after_in_place_changes_or_a_registration_and_a_new_view_repeats():
    _run(_repeats_after_in_place_changes)


def _new_group(dist, store, rank: int, size: int) -> None:
    import torch
    dist.init_process_group("gloo", store=store, rank=rank, world_size=size)
    group = dist.new_group(backend="mscclpp")
    assert dist.get_backend(group) == "mscclpp"
    t = torch.full((9,), float(rank + 1), dtype=torch.bfloat16)
    dist.all_reduce(t, group=group)
    assert torch.equal(t, torch.full((9,), 3.0, dtype=torch.bfloat16))
    dist.destroy_process_group()


def test_backend_serves_a_group_made_by_new_group_beside_another_backend():
    _run(_new_group)


def _count_calls(comm) -> dict:
    """Wrap ``comm``'s collectives to count the calls that reach pymscclpp."""
    counts = {}
    for name in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"):
        def counted(*args, _name=name, _call=getattr(comm, name), **kwargs):
            counts[_name] = counts.get(_name, 0) + 1
            return _call(*args, **kwargs)
        setattr(comm, name, counted)
    return counts


def _functional_compile_dtensor(dist, store, rank: int, size: int) -> dict:
    import torch
    import torch.distributed._functional_collectives as fc
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    _init(dist, store, rank, size)
    group = dist.group.WORLD
    counts = _count_calls(group.comm)
    assert torch.equal(fc.all_reduce(torch.full((4,), rank + 1.0), "sum", group), torch.full((4,), 3.0))
    assert torch.equal(fc.all_gather_tensor(torch.full((2,), float(rank)), 0, group), torch.tensor([0.0, 0, 1, 1]))
    assert torch.equal(fc.reduce_scatter_tensor(torch.arange(4.0), "sum", 0, group),
                       torch.arange(4.0)[2 * rank:2 * rank + 2] * 2)
    assert torch.equal(fc.all_to_all_single(torch.arange(4.0) + 10 * rank, None, None, group),
                       torch.tensor([0.0, 1, 10, 11]) + 2 * rank)
    functional = dict(counts)

    def step(x):
        y = x * 2
        dist.all_reduce(y)
        return y + 1
    device = torch.get_default_device().type  # cpu on the simulator, cuda in tests/gpu/run_torch.py
    compiled = torch.compile(step, backend="inductor" if device == "cuda" else "aot_eager",
                             fullgraph=True)  # fullgraph: the call breaks no graph
    assert torch.equal(compiled(torch.full((4,), rank + 1.0)), torch.full((4,), 7.0))

    torch.manual_seed(0)  # the same module and input on every rank
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))
    x = torch.randn(3, 8)
    want = mlp(x)
    parallelize_module(mlp, init_device_mesh(device, (size,)), {"0": ColwiseParallel(), "2": RowwiseParallel()})
    assert mlp[0].weight.to_local().shape == (16 // size, 8)
    torch.testing.assert_close(mlp(x), want)
    dist.destroy_process_group()
    return {"functional": functional, "total": counts}


def test_functional_collectives_compiled_all_reduce_and_dtensor_tp_run_on_pymscclpp():
    for result in _run(_functional_compile_dtensor):
        assert result["functional"] == {"all_reduce": 1, "all_gather": 1, "reduce_scatter": 1, "all_to_all": 1}
        assert result["total"]["all_reduce"] >= 3  # + the compiled call + RowwiseParallel's output
