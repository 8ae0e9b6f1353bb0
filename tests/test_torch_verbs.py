"""The verbs beyond the even collectives on the "mscclpp" torch backend, with no fallback (anything forwarded
raises): send, recv, isend, irecv, batch_isend_irecv, all_to_all_single with split sizes, list all_to_all, reduce,
gather, scatter, AVG, and sends and collectives in a subgroup; 2 and 3 rank processes on the simulator."""

from __future__ import annotations

import contextlib

import pytest

torch = pytest.importorskip("torch")

from torch_ranks import run_ranks  # noqa: E402

NO_FALLBACK = {"PYMSCCLPP_TORCH_FALLBACK": "none", "PYMSCCLPP_TIMEOUT_S": "60"}


def _rows(rank: int, peer: int, n: int) -> torch.Tensor:
    """What ``rank`` sends ``peer``: ``n`` rows of 3 values naming both."""
    return (torch.arange(n * 3, dtype=torch.float32) + 100 * rank + 10 * peer).reshape(n, 3)


def _point_to_point(dist, rank: int, size: int) -> None:
    """Blocking send/recv from rank 0 to the last rank, isend/irecv back, and a batch in both ring directions."""
    last = size - 1
    if rank == 0:
        dist.send(_rows(0, last, 5), dst=last)
        back = torch.zeros(4, dtype=torch.int32)
        dist.irecv(back, src=last).wait()
        assert torch.equal(back, torch.arange(4, dtype=torch.int32) * 7), back
    elif rank == last:
        got = torch.zeros(5, 3)
        dist.recv(got, src=0)
        assert torch.equal(got, _rows(0, last, 5)), got
        dist.isend(torch.arange(4, dtype=torch.int32) * 7, dst=0).wait()
    right, left = (rank + 1) % size, (rank - 1) % size
    from_left, from_right = torch.zeros(2 + left, 3), torch.zeros(2 + right, 3)
    ops = [dist.P2POp(dist.irecv, from_left, left), dist.P2POp(dist.irecv, from_right, right),
           dist.P2POp(dist.isend, _rows(rank, right, 2 + rank), right),
           dist.P2POp(dist.isend, _rows(rank, left, 2 + rank), left)]
    for work in dist.batch_isend_irecv(ops):  # every rank receives first: one group, no deadlock
        work.wait()
    assert torch.equal(from_left, _rows(left, rank, 2 + left)) and torch.equal(from_right, _rows(right, rank, 2 + right))


def _coalesced_point_to_point(dist, rank: int, size: int) -> None:
    """torch's coalescing manager (older torch's batch_isend_irecv) brackets the calls as one batch too."""
    from torch.distributed.distributed_c10d import _coalescing_manager
    peer = (rank + 1) % size
    got = torch.zeros(6)  # on torch's default device (CUDA in tests/gpu/run_torch.py)
    with _coalescing_manager(dist.group.WORLD, got.device, async_ops=True) as cm:
        dist.irecv(got, src=(rank - 1) % size)
        dist.isend(torch.full((6,), float(rank)), dst=peer)
    cm.wait()
    assert torch.equal(got, torch.full((6,), float((rank - 1) % size)))


def _all_to_all(dist, rank: int, size: int) -> None:
    """all_to_all_single with split sizes (rank r sends rank p r + p + 1 rows, none to itself on rank 1) and the
    list all_to_all of tensors of other shapes."""
    def rows(r: int, p: int) -> int:
        return 0 if r == p == 1 else r + p + 1
    send = torch.cat([_rows(rank, p, rows(rank, p)) for p in range(size)])
    recv = torch.full((sum(rows(p, rank) for p in range(size)), 3), -1.0)
    dist.all_to_all_single(recv, send, [rows(p, rank) for p in range(size)], [rows(rank, p) for p in range(size)])
    assert torch.equal(recv, torch.cat([_rows(p, rank, rows(p, rank)) for p in range(size)])), recv
    outs = [torch.zeros(p + 1, 2, dtype=torch.bfloat16) for p in range(size)]
    dist.all_to_all(outs, [torch.full((rank + 1, 2), float(10 * rank + p), dtype=torch.bfloat16)
                           for p in range(size)])
    for p, out in enumerate(outs):
        assert torch.equal(out, torch.full((p + 1, 2), float(10 * p + rank), dtype=torch.bfloat16)), (p, out)


def _rooted(dist, rank: int, size: int) -> None:
    """reduce (SUM, MAX, AVG) to the last rank, gather to rank 1, scatter from rank 0."""
    last = size - 1
    for op, want in ((dist.ReduceOp.SUM, float(sum(range(1, size + 1)))), (dist.ReduceOp.MAX, float(size)),
                     (dist.ReduceOp.AVG, (size + 1) / 2)):
        t = torch.full((9,), float(rank + 1))
        dist.reduce(t, dst=last, op=op)
        assert torch.equal(t, torch.full((9,), want if rank == last else float(rank + 1))), (op, t)
    parts = [torch.zeros(2, 2, dtype=torch.int32) for _ in range(size)] if rank == 1 else None
    dist.gather(torch.full((2, 2), rank + 3, dtype=torch.int32), parts, dst=1)
    if rank == 1:
        assert [p.tolist() for p in parts] == [[[r + 3] * 2] * 2 for r in range(size)]
    mine = torch.zeros(4, dtype=torch.float16)
    dist.scatter(mine, [torch.full((4,), r + 0.5, dtype=torch.float16) for r in range(size)] if rank == 0 else None,
                 src=0)
    assert torch.equal(mine, torch.full((4,), rank + 0.5, dtype=torch.float16))


def _average(dist, rank: int, size: int) -> None:
    """ReduceOp.AVG of all_reduce and reduce_scatter_tensor."""
    t = torch.full((10,), 2.0 * rank)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    assert torch.allclose(t, torch.full((10,), float(size - 1)))
    out = torch.zeros(3)
    dist.reduce_scatter_tensor(out, torch.arange(3.0 * size) * (rank + 1), op=dist.ReduceOp.AVG)
    assert torch.allclose(out, torch.arange(3.0 * rank, 3.0 * rank + 3) * (size + 1) / 2), out


def _subgroup(dist, rank: int, size: int) -> None:
    """A group of the first and last ranks (renumbered 0 and 1): all_reduce, send/recv and a batch in it, while
    the ranks outside it go on; then the world group again."""
    ends = dist.new_group([0, size - 1])
    if rank in (0, size - 1):
        t = torch.full((5,), float(rank))
        dist.all_reduce(t, group=ends)
        assert torch.equal(t, torch.full((5,), float(size - 1)))
        other = size - 1 - rank
        got = torch.zeros(3)
        works = dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.full((3,), rank + 1.0), other, group=ends),
                                        dist.P2POp(dist.irecv, got, other, group=ends)])
        for work in works:
            work.wait()
        assert torch.equal(got, torch.full((3,), other + 1.0))
        if rank == 0:
            dist.send(torch.ones(2), dst=size - 1, group=ends)
        else:
            dist.recv(got[:2], src=0, group=ends)
            assert got.tolist() == [1.0, 1.0, 1.0]
    dist.barrier()


def _recv_from_any_source(dist, rank: int, size: int) -> str:
    try:
        dist.recv(torch.zeros(1))
    except Exception as exc:  # noqa: BLE001 (the text is what is checked)
        return str(exc)
    raise AssertionError("recv from any source: no error")


def _every_verb(dist, store, rank: int, size: int) -> str:
    dist.init_process_group("mscclpp", store=store, rank=rank, world_size=size)
    for check in (_point_to_point, _coalesced_point_to_point, _all_to_all, _rooted, _average, _subgroup):
        check(dist, rank, size)
    text = _recv_from_any_source(dist, rank, size)
    dist.destroy_process_group()
    return text


@pytest.mark.parametrize("size", [2, 3])
def test_every_verb_runs_on_pymscclpp_with_no_fallback(size):
    for text in run_ranks(_every_verb, size=size, env=NO_FALLBACK):
        assert "recv from any source" in text and "receives only from a named rank" in text, text


def test_a_batch_left_open_by_an_error_is_dropped_with_its_calls_when_the_next_one_starts():
    from pymscclpp.errors import InvalidUsageError
    from pymscclpp.torch.p2p import Batch
    log = []

    class Comm:
        @contextlib.contextmanager
        def group(self):
            log.append("open")
            try:
                yield
            except InvalidUsageError:
                log.append("dropped")
                raise
            log.append("issued")

    batch = Batch(Comm())
    batch.start()  # its calls raised: torch's coalescing manager never ends it
    batch.start()
    assert batch.end().is_completed()
    assert log == ["open", "dropped", "open", "issued"]
    with pytest.raises(InvalidUsageError, match="_end_coalescing without _start_coalescing"):
        batch.end()
