"""Run under ``mpiexec -n N``: MpiBootstrap, and TcpBootstrap from a UniqueId broadcast over MPI."""

import sys
import time
import traceback

from mpi4py import MPI

from pymscclpp.errors import CommTimeoutError, InvalidUsageError
from pymscclpp.runtime.bootstrap import Bootstrap, MpiBootstrap, TcpBootstrap, UniqueId, get_unique_id
from pymscclpp.runtime.setup_guard import SetupGuard


def exercise(bs: Bootstrap) -> None:
    """all_gather, barrier, ring send/recv with tags received out of order, a recv timeout."""
    rank, size = bs.rank, bs.size
    assert len(bs.job_token) == 16 and bs.all_gather(bs.job_token) == [bs.job_token] * size
    assert bs.all_gather(b"r%d" % rank * rank) == [b"r%d" % r * r for r in range(size)]
    assert bs.all_gather(b"") == [b""] * size
    bs.barrier()
    if size > 1:
        right, left = (rank + 1) % size, (rank - 1) % size
        for tag in (1, 2, 2**63 - 1):
            bs.send(b"%d:%d" % (rank, tag), right, tag)
        bs.send(b"second", right, 1)
        assert bs.recv(left, 2**63 - 1) == b"%d:%d" % (left, 2**63 - 1)
        assert bs.recv(left, 2) == b"%d:2" % left
        assert bs.recv(left, 1) == b"%d:1" % left
        assert bs.recv(left, 1) == b"second"
        big = bytes(range(256)) * 4096
        bs.send(big, right, 5)
        assert bs.recv(left, 5) == big
        try:
            bs.recv(left, 99, timeout=0.05)
        except CommTimeoutError as exc:
            assert f"rank {rank}" in str(exc) and f"peer {left}" in str(exc) and "tag 99" in str(exc), exc
        else:
            raise AssertionError("recv of a message never sent did not time out")
    bs.barrier()


def setup_failure_is_symmetric(bs: Bootstrap) -> None:
    """The last rank fails a set-up scope while the others wait to receive from it: all raise its error at once;
    the next scope works."""
    last = bs.size - 1
    guard = SetupGuard(bs, lambda scope: None)
    start = time.monotonic()
    try:
        with guard.scope("mpi set-up"):
            if bs.rank == last:
                raise InvalidUsageError("refused here")
            bs.recv(last, 7)
    except InvalidUsageError as exc:
        assert str(exc) == f"mpi set-up failed on rank {last}: refused here", exc
        assert time.monotonic() - start < 1.0, "a rank waited for the failing rank"
    else:
        raise AssertionError("the set-up succeeded although a rank failed it")
    with guard.scope("mpi set-up again"):
        bs.send(b"ok", (bs.rank + 1) % bs.size, 8)
        assert bs.recv((bs.rank - 1) % bs.size, 8) == b"ok"


def main() -> None:
    world = MPI.COMM_WORLD
    with MpiBootstrap(world, timeout=30) as bs:
        exercise(bs)
        setup_failure_is_symmetric(bs)
    uid = bytearray(get_unique_id("127.0.0.1").to_bytes() if world.Get_rank() == 0 else UniqueId.SIZE)
    world.Bcast([uid, MPI.BYTE], root=0)
    with TcpBootstrap(world.Get_rank(), world.Get_size(), UniqueId.from_bytes(uid), timeout=30) as bs:
        exercise(bs)
        setup_failure_is_symmetric(bs)
    world.Barrier()


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)
    print(f"rank {MPI.COMM_WORLD.Get_rank()}: bootstrap MPI checks passed")
