"""Device helpers that generated executor kernels call besides the channel primitives.

``st`` is the plan's persistent uint64 state array on this rank (see ``resources.StateLayout``): packet
flags per thread block, barrier counters, plan semaphores, and, for the simulator variant, the barriers
of the thread groups that stand in for thread blocks. Waits are bounded by ``timeout_ns`` (0: unbounded)
and the communicator's ``abort`` word, and record why they ended in the error area like channel waits do.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..channels import fifo
from ..channels.device_errors import OP_WAIT
from ..channels.primitives import LL16_BYTES, LL16_DATA, next_flag, read_packet_ll16
from ..channels.ptx import load_acquire, store_release, store_v4_volatile
from ..channels.spin import spin_until, wait_at_least
from ..runtime.device_errors import WaitContext
from ..runtime.fifo import TRIGGER_DATA, TRIGGER_SYNC

_ONE = np.uint64(1)
_NO_PEER = np.int64(-1)  # waits on this rank's own memory


@cuda.jit(device=True)
def flag_begin(st, g):
    """This execution's packet flag for thread block ``g``: one more than its last (never 0; parity
    alternates across the 32-bit wrap, so double-buffered scratch halves alternate too)."""
    return next_flag(st[g])


@cuda.jit(device=True)
def flag_end(st, g, flag):
    """Record thread block ``g``'s flag; call from one thread after all its threads are done with it."""
    st[g] = np.uint64(flag)


@cuda.jit(device=True)
def split(size, index, slices, align):
    """Byte offset of slice ``index`` of ``slices`` of ``size`` bytes cut in ``align``-byte units, the
    remainder spread over the first slices (how thread-block groups share an op, as MSCCL++ splits it)."""
    units = size // align
    q = units // slices
    r = units - q * slices
    return (index * q + min(index, r)) * align


@cuda.jit(device=True)
def _local_wait(err, abort, rank, timeout_ns, what):
    """The error context of a wait on this rank's own state, recorded with channel code ``what``
    (``runtime.device_errors.LOCAL_WAITS``)."""
    return WaitContext(err, abort, rank, _NO_PEER, np.int64(what), timeout_ns)


@cuda.jit(device=True)
def group_sync(st, base, g, nt, err, abort, rank, timeout_ns):
    """Barrier of the ``nt`` threads playing thread block ``g`` (the simulator's stand-in for syncthreads):
    counter ``st[base + 2g]``, generation ``st[base + 2g + 1]``."""
    c = base + 2 * g
    gen = load_acquire(st, c + 1)
    if cuda.atomic.add(st, c, _ONE) == np.uint64(nt - 1):
        st[c] = np.uint64(0)
        store_release(st, c + 1, gen + _ONE)
        return
    wait_at_least(st, c + 1, gen + _ONE, _local_wait(err, abort, rank, timeout_ns, -2), _NO_PEER, -2, OP_WAIT)


@cuda.jit(device=True)
def tb_barrier(st, i, num, err, abort, rank, timeout_ns):
    """One thread of each of ``num`` thread blocks meets the others at counter ``st[i]`` (monotonic: round
    k completes when it reaches (k+1)*num)."""
    cuda.threadfence()
    old = cuda.atomic.add(st, i, _ONE)
    target = (old // np.uint64(num) + _ONE) * np.uint64(num)
    wait_at_least(st, i, target, _local_wait(err, abort, rank, timeout_ns, -3), _NO_PEER, -3, OP_WAIT)
    cuda.threadfence()


@cuda.jit(device=True)
def sem_release(st, i):
    """Release plan semaphore ``st[i]`` (one thread): earlier writes become visible to its acquirer."""
    cuda.threadfence()
    cuda.atomic.add(st, i, _ONE)


@cuda.jit(device=True)
def sem_acquire(st, i, err, abort, rank, timeout_ns):
    """Take one unit of plan semaphore ``st[i]`` (one thread), waiting while it is 0."""
    spin_until(_take_one, st, i, _ONE, _local_wait(err, abort, rank, timeout_ns, -4), _NO_PEER, -4, OP_WAIT, OP_WAIT)
    cuda.threadfence()


@cuda.jit(device=True)
def _take_one(st, i, _):
    """Probe (``spin.spin_until``): took one unit of plan semaphore ``st[i]`` (it was positive)."""
    v = load_acquire(st, i)
    return v > np.uint64(0) and cuda.atomic.cas(st, i, v, v - _ONE) == v, v, v


@cuda.jit(device=True)
def forward_packets(dst, dst_off, pkt, pkt_off, nbytes, tid, nthreads, flag, ctx, op):
    """Wait for the LL16 packets carrying ``nbytes`` at ``pkt[pkt_off:]`` and store them, flag and all, at
    ``dst[dst_off:]`` (a peer's scratch): the read-put-packets op. False on timeout."""
    npkt = (nbytes + LL16_DATA - 1) // LL16_DATA
    f = np.uint32(flag)
    i = tid
    while i < npkt:
        a, c, ok = read_packet_ll16(pkt, pkt_off + i * LL16_BYTES, flag, ctx, op)
        if not ok:
            return False
        store_v4_volatile(dst, dst_off + i * LL16_BYTES, a, f, c, f)
        i += nthreads
    return True


@cuda.jit(device=True)
def await_packets(pkt, pkt_off, nbytes, tid, nthreads, flag, ctx, op):
    """Wait until the LL16 packets carrying ``nbytes`` at ``pkt[pkt_off:]`` hold this execution's flag
    (before the proxy forwards them as they are). False on timeout."""
    i = tid
    while i < (nbytes + LL16_DATA - 1) // LL16_DATA:
        _, _, ok = read_packet_ll16(pkt, pkt_off + i * LL16_BYTES, flag, ctx, op)
        if not ok:
            return False
        i += nthreads
    return True


@cuda.jit(device=True)
def packet_bytes(nbytes):
    """Bytes of the LL16 packets that carry ``nbytes`` of data."""
    return (nbytes + LL16_DATA - 1) // LL16_DATA * LL16_BYTES


@cuda.jit(device=True)
def port_put(ch, kind, dst_id, dst_off, src_id, src_off, nbytes):
    """Ask the proxy of port channel ``ch`` to run trigger ``kind`` (fifo.TRIGGER_*) copying ``nbytes`` from
    local memory ``src_id`` to the peer's memory ``dst_id`` (ids per op, as plans name several buffers); no
    data when ``nbytes`` is 0. With TRIGGER_SYNC, wait until the proxy completed it. False on error."""
    if nbytes <= 0:
        kind = kind & ~TRIGGER_DATA
        nbytes = 0
    if kind == 0:
        return True
    w0, w1 = fifo.trigger_words(kind, dst_id, dst_off, src_id, src_off, nbytes, ch.channel)
    ticket = fifo.push(ch, w0, w1)
    if kind & TRIGGER_SYNC:
        return fifo.wait_popped(ch, ticket)
    return ticket != fifo.PUSH_FAILED
