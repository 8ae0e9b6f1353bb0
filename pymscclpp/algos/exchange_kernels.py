"""The exchange kernel: every rank sends each peer its own byte range and receives each peer's into its own range
(send/recv groups, all-to-all with counts, gather, scatter), or, with a root, the root reduces what every rank
sends it (reduce). One launch, whatever the number of peers and bytes, so a group's sends and receives never
wait on a launch queued behind them.

``table`` holds six int64 per rank p: (send offset, send bytes, receive offset, receive bytes, send descriptor,
receive descriptor); descriptors are ``runtime.fingerprint`` packs of what this rank sends p and receives from
p, 0 with the check off. Before any data moves between two ranks they trade descriptors (LL16 packets in a
per-pair area, flagged with a per-pair sequence number), and a disagreement is recorded on both (pair check).

Data goes in rounds of ``chunk`` bytes through the receiver's scratch (a slot of two halves per sender; block b
owns the same slice of every round and semaphores 2b (data) and 2b + 1 (credits)): the sender writes round k
once the receiver freed round k - 2 of that half, the receiver copies it out and returns a credit. Within a
round every block sends before it receives, so every wait depends on a step that comes earlier on its peer:
no deadlock for any pattern. A call ends once every credit is back, so the next starts on free halves.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..channels import memory_channel as mc
from ..channels import primitives as prim
from ..channels import reduce as red
from ..channels import semaphore as sem
from ..channels.device_errors import (OP_PAIR_RECV, OP_PAIR_SEND, OP_PAIR_WAIT, OP_RECV_DATA, OP_SEND_CREDIT,
                                      record_mismatch)
from ..channels.peers import peer_rank
from ..channels.ptx import store_v4_volatile
from .blocks import SIMPLE_LIMITS, copy_unless_same, round_share

ROW = 6  # table entries per rank
SEND_OFF, SEND_N, RECV_OFF, RECV_N, SEND_FP, RECV_FP = range(ROW)
AREA_SLOT = 2 * prim.LL16_BYTES  # a pair area slot: the sender's send and receive descriptors


@cuda.jit(device=True)
def next_seq(seqs, k):
    """The pair sequence number of this call in word ``k`` (one more than the last, never 0, parity alternating)."""
    f = np.int64(seqs[k]) + 1
    if f > 0xFFFFFFFF:
        f = 2
    return f


@cuda.jit(device=True)
def checked(table, p):
    """Whether this call trades descriptors with rank ``p`` (it moves data with it, or a collective asks)."""
    return table[ROW * p + SEND_FP] != 0 or table[ROW * p + RECV_FP] != 0


@cuda.jit(device=True)
def post_descriptors(areas, table, seqs, rank, nranks):
    """Block 0's thread j puts our descriptors for peer j into slot ``rank`` of its pair area."""
    tid = cuda.threadIdx.x
    if cuda.blockIdx.x == 0 and tid < nranks - 1:
        p = peer_rank(tid, rank)
        if checked(table, p):
            seq = next_seq(seqs, p)
            f = np.uint32(seq)
            off = ((seq % 2) * nranks + rank) * AREA_SLOT
            s, r = table[ROW * p + SEND_FP], table[ROW * p + RECV_FP]
            store_v4_volatile(areas[tid], off, np.uint32(s & 0xFFFFFFFF), f, np.uint32(s >> 32), f)
            store_v4_volatile(areas[tid], off + prim.LL16_BYTES, np.uint32(r & 0xFFFFFFFF), f, np.uint32(r >> 32), f)


@cuda.jit(device=True)
def _descriptor(area, off, seq, ctx, p):
    """(the int64 in the LL16 packet at ``off``, arrived)."""
    a, c, got = prim.read_packet_ll16_from(area, off, seq, ctx, p, OP_PAIR_WAIT)
    return (np.int64(c) << np.int64(32)) | np.int64(a), got


@cuda.jit(device=True)
def pairs_agree(chans, area, table, seqs, rank, nranks):
    """True on every thread of the block when every peer we trade with sends what we receive and receives what
    we send; thread j checks peer j, a disagreement or a failed wait is recorded. Then the block's sequence
    words advance."""
    tid = cuda.threadIdx.x
    bad = 0
    seq = 0
    k = 0
    if tid < nranks - 1:
        p = peer_rank(tid, rank)
        if checked(table, p):
            k = cuda.blockIdx.x * nranks + p
            seq = next_seq(seqs, k)
            off = ((seq % 2) * nranks + p) * AREA_SLOT
            their_send, got = _descriptor(area, off, seq, chans[tid], p)
            their_recv = np.int64(0)
            if got:
                their_recv, got = _descriptor(area, off + prim.LL16_BYTES, seq, chans[tid], p)
            mine_send, mine_recv = table[ROW * p + SEND_FP], table[ROW * p + RECV_FP]
            if not got:
                bad = 1
            elif their_send != mine_recv:
                record_mismatch(chans[tid].err, OP_PAIR_RECV, rank, p, seq, mine_recv, their_send)
                bad = 1
            elif their_recv != mine_send:
                record_mismatch(chans[tid].err, OP_PAIR_SEND, rank, p, seq, mine_send, their_recv)
                bad = 1
    bad = cuda.syncthreads_or(bad)
    if seq != 0:
        seqs[k] = seq
    return bad == 0


@cuda.jit(device=True)
def rounds_of(table, rank, nranks, chunk):
    """Rounds of the call: the most any peer's send or receive range takes."""
    most = 0
    for p in range(nranks):
        if p != rank:
            most = max(most, table[ROW * p + SEND_N], table[ROW * p + RECV_N])
    return (most + chunk - 1) // chunk


@cuda.jit(device=True)
def waited(ch, idx, op):
    """Thread 0 waits on semaphore ``idx`` of ``ch``; True on every thread when the wait failed (recorded)."""
    failed = 0
    if cuda.threadIdx.x == 0 and not sem.wait_for(ch, idx, op):
        failed = 1
    return cuda.syncthreads_or(failed) != 0


@cuda.jit(device=True)
def _signal(ch, idx):
    """Once every thread of the block is done with the round's bytes, thread 0 signals ``idx`` on ``ch``."""
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        mc.signal(ch, idx)


@cuda.jit(device=True)
def send_round(chans, table, inp, chunk, rank, nranks, k, tid, nt):
    """Round ``k`` of every peer's send range into its scratch slot ``rank`` (after its credit for round k - 2);
    False when a wait failed."""
    b = cuda.blockIdx.x
    for j in range(nranks - 1):
        p = peer_rank(j, rank)
        n = table[ROW * p + SEND_N]
        if k * chunk < n:
            if k >= 2 and waited(chans[j], 2 * b + 1, OP_SEND_CREDIT):
                return False
            lo, cnt = round_share(n, chunk, k)
            if cnt > 0:
                prim.copy_bytes(chans[j].dst, (2 * rank + k % 2) * chunk + lo, inp,
                                table[ROW * p + SEND_OFF] + k * chunk + lo, cnt, tid, nt)
            _signal(chans[j], 2 * b)
    return True


@cuda.jit(device=True)
def receive_round(chans, table, out, scratch, chunk, rank, nranks, k, tid, nt):
    """Round ``k`` of every peer's range out of its slot of our scratch into ``out``, then its credit; False when
    a wait failed."""
    b = cuda.blockIdx.x
    for j in range(nranks - 1):
        p = peer_rank(j, rank)
        n = table[ROW * p + RECV_N]
        if k * chunk < n:
            if waited(chans[j], 2 * b, OP_RECV_DATA):
                return False
            lo, cnt = round_share(n, chunk, k)
            if cnt > 0:
                prim.copy_bytes(out, table[ROW * p + RECV_OFF] + k * chunk + lo, scratch,
                                (2 * p + k % 2) * chunk + lo, cnt, tid, nt)
            _signal(chans[j], 2 * b + 1)
    return True


@cuda.jit(device=True)
def reduce_round(chans, table, inp, out, scratch, chunk, rank, nranks, k, tid, nt, kind, op):
    """At the root, round ``k`` of every rank's data (ours from ``inp``, the peers' from their scratch slots)
    reduced in rank order into ``out``, then a credit to every peer; False when a wait failed."""
    b = cuda.blockIdx.x
    n = table[ROW * peer_rank(0, rank) + RECV_N]
    if k * chunk >= n:
        return True
    failed = 0
    if tid < nranks - 1 and not sem.wait_for(chans[tid], 2 * b, OP_RECV_DATA):
        failed = 1
    if cuda.syncthreads_or(failed):
        return False
    lo, cnt = round_share(n, chunk, k)
    if cnt > 0:
        at = k * chunk + lo
        red.reduce_slots(out, table[ROW * rank + RECV_OFF] + at, inp, table[ROW * rank + SEND_OFF] + at, rank,
                         scratch, (k % 2) * chunk + lo, 2 * chunk, nranks, cnt, tid, nt, kind, op, chans)
    cuda.syncthreads()
    if tid < nranks - 1:
        mc.signal(chans[tid], 2 * b + 1)
    return True


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
def copy_own(table, inp, out, rank, tid, nt):
    """Our own send range into our own receive range (a send to ourselves; skipped in place)."""
    own = table[ROW * rank + SEND_N]
    if own > 0:
        lo, cnt = round_share(own, own, 0)
        if cnt > 0:
            copy_unless_same(out, table[ROW * rank + RECV_OFF] + lo, inp, table[ROW * rank + SEND_OFF] + lo, cnt,
                             tid, nt)


@cuda.jit(device=True)
def peer_exchange(chans, areas, area, table, inp, out, scratch, seqs, chunk, rank, nranks, root, kind, op):
    """One call: the pair check, our own range copied (unless in place), then the rounds; ``root`` >= 0: a
    reduce into ``root`` (its receive ranges are the peers' data, reduced with ``kind`` and ``op``)."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    post_descriptors(areas, table, seqs, rank, nranks)
    if not pairs_agree(chans, area, table, seqs, rank, nranks):
        return
    if root < 0:
        copy_own(table, inp, out, rank, tid, nt)
    for k in range(rounds_of(table, rank, nranks, chunk)):
        if not send_round(chans, table, inp, chunk, rank, nranks, k, tid, nt):
            return
        if root < 0:
            if not receive_round(chans, table, out, scratch, chunk, rank, nranks, k, tid, nt):
                return
        elif rank == root:
            if not reduce_round(chans, table, inp, out, scratch, chunk, rank, nranks, k, tid, nt, kind, op):
                return
    drain_credits(chans, 2 * cuda.blockIdx.x + 1, table, chunk, rank, nranks)


@cuda.jit(cache=True, **SIMPLE_LIMITS)
def peer_exchange_simple(chans, areas, area, table, inp, out, scratch, seqs, chunk, rank, nranks, root, kind, op):
    """``peer_exchange`` (puts and semaphores)."""
    peer_exchange(chans, areas, area, table, inp, out, scratch, seqs, chunk, rank, nranks, root, kind, op)
