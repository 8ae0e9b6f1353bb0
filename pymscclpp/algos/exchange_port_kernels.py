"""The exchange kernel for ranks on several hosts (``exchange_kernels`` over PortChannels): one block, the same
table, rounds and credits; the sender copies round k of a peer's range into its own slot of ``stage`` (a
memory of the proxy) and asks the proxy to put it into the peer's scratch and signal (data semaphore); the
receiver copies it out and signals back through the proxy (credit semaphore). The ranks' descriptors are traded
on the host before the launch (``algos.exchange_port``), so the kernel has no pair check.
"""

from __future__ import annotations

from numba import cuda

from ..channels import port_channel as pc
from ..channels import primitives as prim
from ..channels import reduce as red
from ..channels import semaphore as sem
from ..channels.device_errors import OP_RECV_DATA, OP_SEND_CREDIT
from ..channels.peers import peer_rank
from .shares import round_share
from .exchange_kernels import RECV_N, RECV_OFF, ROW, SEND_N, SEND_OFF, copy_own, rounds_of, waited


@cuda.jit(device=True)
def drain_credits(credits, idx, table, chunk, rank, nranks):
    """Wait on semaphore ``idx`` of ``credits[j]`` for the credits of the last two rounds sent to each peer j:
    its scratch halves are free again."""
    for j in range(nranks - 1):
        n = table[ROW * peer_rank(j, rank) + SEND_N]
        for _ in range(min(2, (n + chunk - 1) // chunk)):
            if waited(credits[j], idx, OP_SEND_CREDIT):
                return


@cuda.jit(device=True)
def _pushed(ok):
    """True on every thread when thread 0's push failed (the FIFO recorded why)."""
    return cuda.syncthreads_or(0 if ok else 1) != 0


@cuda.jit(device=True)
def send_round(data, credit, table, inp, stage, chunk, rank, nranks, k, tid, nt):
    """Round ``k`` of every peer's send range through ``stage`` into its scratch slot ``rank``."""
    for j in range(nranks - 1):
        p = peer_rank(j, rank)
        n = table[ROW * p + SEND_N]
        if k * chunk < n:
            if k >= 2 and waited(credit[j], 0, OP_SEND_CREDIT):
                return False
            lo, cnt = round_share(n, chunk, k)
            at = (2 * p + k % 2) * chunk + lo
            prim.copy_bytes(stage, at, inp, table[ROW * p + SEND_OFF] + k * chunk + lo, cnt, tid, nt)
            cuda.syncthreads()
            ok = True
            if tid == 0:
                ok = pc.put_with_signal(data[j], (2 * rank + k % 2) * chunk + lo, at, cnt)
            if _pushed(ok):
                return False
    return True


@cuda.jit(device=True)
def receive_round(data, credit, table, out, scratch, chunk, rank, nranks, k, tid, nt):
    """Round ``k`` of every peer's range out of our scratch into ``out``, then its credit through the proxy."""
    for j in range(nranks - 1):
        p = peer_rank(j, rank)
        n = table[ROW * p + RECV_N]
        if k * chunk < n:
            if waited(data[j], 0, OP_RECV_DATA):
                return False
            lo, cnt = round_share(n, chunk, k)
            prim.copy_bytes(out, table[ROW * p + RECV_OFF] + k * chunk + lo, scratch, (2 * p + k % 2) * chunk + lo,
                            cnt, tid, nt)
            cuda.syncthreads()
            ok = True
            if tid == 0:
                ok = pc.signal(credit[j])
            if _pushed(ok):
                return False
    return True


@cuda.jit(device=True)
def reduce_round(data, credit, table, inp, out, scratch, unused, chunk, rank, nranks, k, tid, nt, kind, op):
    """At the root, round ``k`` of every rank's data reduced in rank order into ``out``, then a credit to each
    peer (``unused``: a channel tuple ``reduce_slots`` types its body with)."""
    n = table[ROW * peer_rank(0, rank) + RECV_N]
    if k * chunk >= n:
        return True
    failed = 0
    if tid < nranks - 1 and not sem.wait_for(data[tid], 0, OP_RECV_DATA):
        failed = 1
    if cuda.syncthreads_or(failed):
        return False
    lo, cnt = round_share(n, chunk, k)
    at = k * chunk + lo
    red.reduce_slots(out, table[ROW * rank + RECV_OFF] + at, inp, table[ROW * rank + SEND_OFF] + at, rank, scratch,
                     (k % 2) * chunk + lo, 2 * chunk, nranks, cnt, tid, nt, kind, op, unused)
    cuda.syncthreads()
    ok = True
    if tid < nranks - 1:
        ok = pc.signal(credit[tid])
    return not _pushed(ok)


@cuda.jit(cache=True)
def peer_exchange_port(data, credit, unused, table, inp, out, stage, scratch, chunk, rank, nranks, root, kind, op):
    """One call across hosts: our own range copied (unless in place), then the rounds (``root`` >= 0: a reduce)."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    if root < 0:
        copy_own(table, inp, out, rank, tid, nt)
    for k in range(rounds_of(table, rank, nranks, chunk)):
        if not send_round(data, credit, table, inp, stage, chunk, rank, nranks, k, tid, nt):
            return
        if root < 0:
            if not receive_round(data, credit, table, out, scratch, chunk, rank, nranks, k, tid, nt):
                return
        elif rank == root:
            if not reduce_round(data, credit, table, inp, out, scratch, unused, chunk, rank, nranks, k, tid, nt,
                                kind, op):
                return
    drain_credits(credit, 0, table, chunk, rank, nranks)
