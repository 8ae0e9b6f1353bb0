"""The "mscclpp" torch.distributed backend on the simulator: CPU tensors stand in for CUDA ones, two rank
processes share a TCPStore; torch itself stays optional."""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import subprocess
import sys
import traceback

import pytest

torch = pytest.importorskip("torch")

_CTX = mp.get_context("spawn")


def _rank_main(fn, rank: int, size: int, ports, env: dict, results) -> None:
    os.environ.update(env)
    try:
        import torch.distributed as dist
        import pymscclpp.torch  # noqa: F401 (registers the backend)
        if rank == 0:  # the store picks a free port itself (no race with other listeners) and tells the others
            store = dist.TCPStore("127.0.0.1", 0, size, is_master=True, wait_for_workers=False)
            for _ in range(size - 1):
                ports.put(store.port)
        else:
            store = dist.TCPStore("127.0.0.1", ports.get(timeout=120), size, is_master=False)
        results.put((rank, True, fn(dist, store, rank, size)))
    except BaseException:
        results.put((rank, False, traceback.format_exc()))


def _run(fn, size: int = 2, env: dict | None = None, timeout: float = 240.0) -> list:
    """Run ``fn(dist, store, rank, size)`` in ``size`` spawned rank processes; their results, or the failures."""
    env = {"PYMSCCLPP_BACKEND": "sim", "PYMSCCLPP_SOCKET_ADDR": "127.0.0.1", **(env or {})}
    results, port = _CTX.Queue(), _CTX.Queue()
    procs = [_CTX.Process(target=_rank_main, args=(fn, r, size, port, env, results), daemon=True)
             for r in range(size)]
    for p in procs:
        p.start()
    out, errors = [None] * size, []
    try:
        for _ in range(size):
            rank, ok, value = results.get(timeout=timeout)
            if ok:
                out[rank] = value
            else:
                errors.append(f"--- rank {rank} ---\n{value}")
    except queue.Empty:
        errors.append(f"ranks did not answer within {timeout} s")
    finally:
        for p in procs:
            p.join(timeout=20)
            if p.is_alive():
                p.kill()
    assert not errors, "\n".join(errors)
    return out


def _init(dist, store, rank: int, size: int) -> None:
    dist.init_process_group("mscclpp", store=store, rank=rank, world_size=size)


def _five_collectives(dist, store, rank: int, size: int) -> None:
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
    assert work.wait()
    assert torch.equal(z, torch.full((8,), 6, dtype=torch.int32))
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
    dist.destroy_process_group()


def test_backend_serves_five_collectives_and_sum_min_max_prod_on_pymscclpp():
    _run(_five_collectives)  # the simulator has no fallback: a forwarded call would raise


def _unserved_calls(dist, store, rank: int, size: int) -> dict:
    import torch
    from pymscclpp.errors import InvalidUsageError
    _init(dist, store, rank, size)
    calls = {"barrier": lambda: dist.barrier(),
             "send": lambda: dist.send(torch.ones(2), dst=1 - rank) if rank == 0 else dist.recv(torch.ones(2), src=0),
             "avg": lambda: dist.all_reduce(torch.ones(4), op=dist.ReduceOp.AVG),
             "float64": lambda: dist.all_reduce(torch.ones(4, dtype=torch.float64)),
             "uneven all_to_all": lambda: dist.all_to_all_single(torch.empty(3), torch.ones(3), [1, 2], [2, 1]),
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
        for name in ("barrier", "avg", "float64", "uneven all_to_all"):
            assert "needs NCCL" in messages[name] and "simulator" in messages[name], messages[name]
        assert "torch.distributed barrier" in messages["barrier"]
        assert "torch.distributed all_reduce" in messages["avg"] and "SUM, MIN, MAX, PRODUCT" in messages["avg"]
        assert "float32" in messages["float64"] and "uneven split sizes" in messages["uneven all_to_all"]
        assert "send" in messages["send"] or "recv" in messages["send"]
        assert "not contiguous" in messages["non-contiguous"]


def _forwarded_calls(dist, store, rank: int, size: int) -> None:
    import torch
    for _ in range(2):  # destroyed and initialized again on the same store
        _init(dist, store, rank, size)
        dist.barrier()
        t = torch.full((3,), float(rank), dtype=torch.float64)
        dist.all_reduce(t)
        assert torch.equal(t, torch.full((3,), 1.0, dtype=torch.float64))
        if rank == 0:
            dist.send(torch.arange(4.0), dst=1)
        else:
            got = torch.zeros(4)
            dist.recv(got, src=0)
            assert torch.equal(got, torch.arange(4.0))
        out = torch.zeros(3)
        dist.all_to_all_single(out, torch.arange(3.0) + 10 * rank, [1, 2] if rank == 0 else [2, 1],
                               [1, 2] if rank == 0 else [2, 1])
        want = torch.tensor([0.0, 10.0, 11.0]) if rank == 0 else torch.tensor([1.0, 2.0, 12.0])
        assert torch.equal(out, want), out
        served = torch.ones(5)
        dist.all_reduce(served)
        assert torch.equal(served, torch.full((5,), 2.0))
        dist.destroy_process_group()


def test_backend_forwards_other_calls_to_fallback_group_and_reinitializes():
    _run(_forwarded_calls, env={"PYMSCCLPP_TORCH_FALLBACK": "gloo"})


def test_pymscclpp_imports_without_torch_and_pymscclpp_torch_names_the_extra():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import pymscclpp; assert pymscclpp.Communicator\n"
            "try:\n    import pymscclpp.torch\nexcept ImportError as exc:\n    print(exc)\n"
            "assert not any(m == 'torch' or m.startswith('torch.') for m in sys.modules if sys.modules[m])\n")
    env = {**os.environ, "PYMSCCLPP_BACKEND": "sim"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "pymscclpp[torch]" in done.stdout


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
