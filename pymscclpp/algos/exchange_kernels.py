"""The exchange kernel: every rank sends each peer its own byte range and receives each peer's into its own range
(send/recv groups, all-to-all with counts, gather, scatter), or, with a root, the root reduces what every rank
sends it (reduce). One launch, whatever the number of peers and bytes, so a group's sends and receives never
wait on a launch queued behind them.

``table`` (kernel arguments, copied into shared memory once per block: ``fill_table``) holds nine int64 per rank
p: (send offset, send bytes, receive offset, receive bytes, send descriptor, receive descriptor, send code, read
code, peer offset); descriptors are ``runtime.fingerprint`` packs of what this rank sends p and receives from p,
0 with the check off. Before any data moves between two ranks they trade
descriptors (LL16 packets in a per-pair area, flagged with a per-pair sequence number), and a disagreement is
recorded on both (pair check). They trade their codes too (``zero_copy_code``): the send code names the mapped
buffer our bytes for p start (0: none), the read code the mapping ``ins`` our kernel reads peers' buffers
through (0: none); when p's send code for us equals our read code, we read p's bytes straight from its buffer
(from its peer offset) and p stages nothing for us. Both ends decide each direction alike, so any mix of staged
and zero-copy pairs runs in one call.

Data goes in rounds of ``chunk`` bytes through a ring of ``slots`` slots per sender in the receiver's scratch:
the sender writes round k once the receiver freed round k - slots of that slot, the receiver copies it out and
returns a credit. Every pair's stream runs on stripes (``stripes_of``: by its bytes, so both ends agree), stripe
l a slice of every round with semaphores 2l (data) and 2l + 1 (credits) of the pair's channel; the stripes of
all peers spread over the blocks, so every peer's transfer runs at once. Each block sends round k of its stripes,
then receives round k - (slots - 1) (the data its peers sent that many steps before: receives rarely wait, and
a late peer does not hold up the chain of every other pair), so every wait depends on a step that comes earlier
on its peer: no deadlock for any pattern while every block runs (``grid``: the grid fits; the simulator, which
runs blocks one after another, runs one). A reduce has every block stream a slice of each rank's range into the
root, which reduces each round of all peers at once.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..channels import memory_channel as mc
from ..channels import primitives as prim
from ..channels import reduce as red
from ..channels import semaphore as sem
from ..channels.device_errors import (OP_PAIR_RECV, OP_PAIR_SEND, OP_PAIR_WAIT, OP_READ_DONE, OP_RECV_DATA,
                                      OP_SEND_CREDIT, record_mismatch)
from ..channels.peers import peer_index, peer_rank
from ..channels.ptx import store_v4_volatile
from .arg_tables import store_tuple
from .blocks import copy_unless_same
from .protocols import SIMPLE_LIMITS
from .shares import copy_share, part_of, round_share

ROW = 9  # table entries per rank
MAX_RANKS = 64  # ranks a call's table may hold: it is copied into shared memory (``fill_table``)
TABLE_WORDS = ROW * MAX_RANKS  # (a shared array's size must be one constant)
SEND_OFF, SEND_N, RECV_OFF, RECV_N, SEND_FP, RECV_FP, SEND_ZC, READ_ZC, PEER_OFF = range(ROW)
AREA_SLOT = 3 * prim.LL16_BYTES  # a pair area slot: the sender's send and receive descriptors, then its codes
ZC_PEERS = 32  # peers a call may read zero-copy from (or be read by): peer indices beyond stage
READS, IS_READ = 1, 2  # a pair's mode bits (``seen``): we read the peer's bytes zero-copy; the peer reads ours
READS_ONLY, STAGED = 0, 1  # ``peer_exchange``'s kernels: every pair zero-copy, or rings for the pairs that stage


@cuda.jit(device=True)
def fill_table(sh, table):
    """The call's table (kernel arguments) into shared memory, once per block (``arg_tables``: read by peer, the
    tuple made the kernel 870 KB of code at 8 ranks)."""
    if cuda.threadIdx.x == 0:
        store_tuple(sh, table)
    cuda.syncthreads()


@cuda.jit(device=True)
def checked(table, p):
    """Whether this call trades descriptors with rank ``p`` (it moves data with it, or a collective asks)."""
    return table[ROW * p + SEND_FP] != 0 or table[ROW * p + RECV_FP] != 0


@cuda.jit(device=True)
def pairs_agree(chans, areas, area, table, seqs, seen, rank, nranks, reads_only):
    """The pair check: True on every thread of the block when every peer we trade with sends what we receive and
    receives what we send. Thread j loads the block's sequence number with peer j once, block 0's puts our
    descriptors and codes for peer j into slot ``rank`` of its pair area, and thread j waits for peer j's (one
    probe); a disagreement or a failed wait is recorded.
    Then the block's sequence words advance. (True when they agree; the call's zero-copy pairs, ``zc``: bit j set
    when we read peer j's bytes, bit ``ZC_PEERS`` + j when peer j reads ours; block 0 writes each pair's
    ``READS``/``IS_READ`` bits to ``seen[j]``.) ``reads_only``: every direction that moves bytes must read
    zero-copy (the ranks agreed on it beforehand), else the pair fails the check: a kernel without rings would
    leave it unmoved."""
    tid = cuda.threadIdx.x
    modes = cuda.shared.array(ZC_PEERS, np.int32)
    bad = 0
    seq = 0
    k = 0
    if tid < nranks - 1:
        mode = 0
        p = peer_rank(tid, rank)
        if checked(table, p):
            ch = chans[tid]
            k = cuda.blockIdx.x * nranks + p
            seq = prim.next_flag(seqs[k])  # never 0, its parity alternating
            f = np.uint32(seq)
            mine_send, mine_recv = table[ROW * p + SEND_FP], table[ROW * p + RECV_FP]
            send_zc, read_zc = table[ROW * p + SEND_ZC], table[ROW * p + READ_ZC]
            if cuda.blockIdx.x == 0:
                off = ((seq % 2) * nranks + rank) * AREA_SLOT
                store_v4_volatile(areas[tid], off, np.uint32(mine_send & 0xFFFFFFFF), f, np.uint32(mine_send >> 32), f)
                store_v4_volatile(areas[tid], off + prim.LL16_BYTES, np.uint32(mine_recv & 0xFFFFFFFF), f,
                                  np.uint32(mine_recv >> 32), f)
                store_v4_volatile(areas[tid], off + 2 * prim.LL16_BYTES, np.uint32(send_zc), f, np.uint32(read_zc), f)
            at = ((seq % 2) * nranks + p) * AREA_SLOT
            a, c, a2, c2, their_send_zc, their_read_zc, got = prim.read_three_packets_ll16_from(
                area, at, seq, ch, p, OP_PAIR_WAIT)
            their_send = (np.int64(c) << np.int64(32)) | np.int64(a)
            their_recv = (np.int64(c2) << np.int64(32)) | np.int64(a2)
            if not got:
                bad = 1
            elif their_send != mine_recv:
                record_mismatch(ch.err, OP_PAIR_RECV, rank, p, seq, mine_recv, their_send)
                bad = 1
            elif their_recv != mine_send:
                record_mismatch(ch.err, OP_PAIR_SEND, rank, p, seq, mine_send, their_recv)
                bad = 1
            elif tid < ZC_PEERS:
                if read_zc != 0 and their_send_zc == read_zc:
                    mode |= READS
                if send_zc != 0 and their_read_zc == send_zc:
                    mode |= IS_READ
            if reads_only and bad == 0 and ((table[ROW * p + RECV_N] > 0 and mode & READS == 0) or
                                            (table[ROW * p + SEND_N] > 0 and mode & IS_READ == 0)):
                record_mismatch(ch.err, OP_PAIR_RECV, rank, p, seq, mine_recv, their_send)
                bad = 1
        if tid < ZC_PEERS:
            modes[tid] = mode
            if cuda.blockIdx.x == 0:
                seen[tid] = mode
    bad = cuda.syncthreads_or(bad)
    if seq != 0:
        seqs[k] = seq
    zc = np.int64(0)
    for j in range(min(nranks - 1, ZC_PEERS)):
        if modes[j] & READS:
            zc |= np.int64(1) << j
        if modes[j] & IS_READ:
            zc |= np.int64(1) << (ZC_PEERS + j)
    return bad == 0, zc


@cuda.jit(device=True)
def zero_copy(zc, j, receiving):
    """Whether the pair with peer index ``j`` moves its receive (or send) direction zero-copy (``pairs_agree``)."""
    return j < ZC_PEERS and (zc >> (j if receiving else ZC_PEERS + j)) & 1 != 0


@cuda.jit(device=True)
def staged_n(table, zc, j, p, receiving):
    """Bytes of our stream with peer ``p`` (index ``j``) that go through the rings: its send (or receive) bytes,
    0 when the pair moves that direction zero-copy."""
    if zero_copy(zc, j, receiving):
        return 0
    return table[ROW * p + (RECV_N if receiving else SEND_N)]


@cuda.jit(device=True)
def staged_rounds_of(table, zc, rank, nranks, chunk):
    """Rounds of the call through the rings: the most any peer's staged send or receive range takes."""
    most = 0
    for j in range(nranks - 1):
        p = peer_rank(j, rank)
        most = max(most, staged_n(table, zc, j, p, 0), staged_n(table, zc, j, p, 1))
    return (most + chunk - 1) // chunk


@cuda.jit(device=True)
def rounds_of(table, rank, nranks, chunk):
    """Rounds of a call that stages every pair: the most any peer's send or receive range takes."""
    return staged_rounds_of(table, np.int64(0), rank, nranks, chunk)


@cuda.jit(device=True)
def waited(ch, idx, op):
    """Thread 0 waits on semaphore ``idx`` of ``ch``; True on every thread when the wait failed (recorded)."""
    failed = 0
    if cuda.threadIdx.x == 0 and not sem.wait_for(ch, idx, op):
        failed = 1
    return cuda.syncthreads_or(failed) != 0


@cuda.jit(device=True)
def _signal(ch, idx, release):
    """Once every thread of the block is done with the round's bytes, thread 0 signals ``idx`` on ``ch``:
    ``release`` after writing into the peer's memory, relaxed (a credit: ordering no writes) after reading."""
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        mc.signal_as(ch, idx, release)


@cuda.jit(device=True)
def stripes_of(nbytes, chunk, stripes, stripe_bytes):
    """Stripes a stream of ``nbytes`` runs on (0: none): one per ``stripe_bytes`` of a round, at most ``stripes``. Both
    ends know the stream's bytes, so they agree."""
    if nbytes <= 0:
        return 0
    return max(1, min(stripes, (min(nbytes, chunk) + stripe_bytes - 1) // stripe_bytes))


@cuda.jit(device=True)
def stripes_in_call(table, zc, chunk, stripes, stripe_bytes, rank, nranks):
    """Every staged send and receive stripe of the call (blocks from this index on have none)."""
    total = 0
    for j in range(nranks - 1):
        p = peer_rank(j, rank)
        total += stripes_of(staged_n(table, zc, j, p, 0), chunk, stripes, stripe_bytes)
        total += stripes_of(staged_n(table, zc, j, p, 1), chunk, stripes, stripe_bytes)
    return total


@cuda.jit(device=True)
def slice_of(nbytes, chunk, k, stripe, nstripes):
    """(first byte within round ``k``, byte count) of stripe ``stripe`` of ``nstripes``: the same 16-byte-aligned slice
    of every round (a short last round ends early); count <= 0: none."""
    r_n = min(chunk, nbytes - k * chunk)
    each = ((min(nbytes, chunk) + nstripes - 1) // nstripes + 15) // 16 * 16
    lo = min(stripe * each, r_n)
    return lo, min(each, r_n - lo)


@cuda.jit(device=True)
def stripe_round(chans, j, table, inp, out, scratch, chunk, slots, rank, p, k, stripe, nstripes, receiving, tid, nt):
    """Round ``k`` of stripe ``stripe`` of our stream with ``p`` (``chans[j]``). Sending: into slot k % ``slots`` of
    our ring in its scratch once it freed that slot (credit of round k - slots on semaphore 2 stripe + 1), then a
    signal on 2 stripe; receiving: out of its ring in our scratch after that signal, then the credit. False when
    the wait failed."""
    ch = chans[j]
    ring = k % slots * chunk  # the round's slot in a ring
    if receiving:
        wait_idx, signal_idx, what, n = 2 * stripe, 2 * stripe + 1, OP_RECV_DATA, table[ROW * p + RECV_N]
    else:
        wait_idx, signal_idx, what, n = 2 * stripe + 1, 2 * stripe, OP_SEND_CREDIT, table[ROW * p + SEND_N]
    if (receiving or k >= slots) and waited(ch, wait_idx, what):
        return False
    lo, cnt = slice_of(n, chunk, k, stripe, nstripes)
    if cnt > 0:
        if receiving:
            dst, dst_off = out, table[ROW * p + RECV_OFF] + k * chunk
            src, src_off = scratch, p * slots * chunk + ring
        else:
            dst, dst_off = ch.dst, rank * slots * chunk + ring
            src, src_off = inp, table[ROW * p + SEND_OFF] + k * chunk
        prim.copy_bytes(dst, dst_off + lo, src, src_off + lo, cnt, tid, nt)
    _signal(ch, signal_idx, not receiving)
    return True


@cuda.jit(device=True)
def exchange_round(chans, table, zc, inp, out, scratch, chunk, slots, stripes, stripe_bytes, rank, nranks, k,
                   receiving, tid, nt):
    """Round ``k`` of the calling block's send (``receiving`` 0) or receive (1) stripes: stripes are numbered every
    peer's staged send stripes first, then every peer's staged receive stripes, and stripe i is block i % blocks's.
    False when a wait failed."""
    b, nb = cuda.blockIdx.x, cuda.gridDim.x
    i = 0
    for phase in range(2):
        for j in range(nranks - 1):
            p = peer_rank(j, rank)
            n = staged_n(table, zc, j, p, phase)
            nl = stripes_of(n, chunk, stripes, stripe_bytes)
            for stripe in range(nl):
                if phase == receiving and i % nb == b and k * chunk < n and not stripe_round(
                        chans, j, table, inp, out, scratch, chunk, slots, rank, p, k, stripe, nl, phase != 0, tid, nt):
                    return False
                i += 1
    return True


@cuda.jit(device=True)
def drain_stripes(chans, table, zc, chunk, slots, stripes, stripe_bytes, rank, nranks):
    """Every staged send stripe of the calling block waits for the credits of its last rounds: the rings are free
    again for the next call."""
    b, nb = cuda.blockIdx.x, cuda.gridDim.x
    i = 0
    for j in range(nranks - 1):
        n = staged_n(table, zc, j, peer_rank(j, rank), 0)
        nl = stripes_of(n, chunk, stripes, stripe_bytes)
        for stripe in range(nl):
            if i % nb == b:
                for _ in range(min(slots, (n + chunk - 1) // chunk)):
                    if waited(chans[j], 2 * stripe + 1, OP_SEND_CREDIT):
                        return
            i += 1


@cuda.jit(device=True)
def send_to_root(chans, table, inp, chunk, slots, rank, root, tid, nt):
    """A reduce off the root: our range, every block its slice of each round, into ring ``rank`` of the root's
    scratch (after the credit of round k - ``slots``), then the last credits; False when a wait failed."""
    ch = chans[peer_index(root, rank)]
    b = cuda.blockIdx.x
    n = table[ROW * root + SEND_N]
    sent = (n + chunk - 1) // chunk
    for k in range(sent):
        if k >= slots and waited(ch, 2 * b + 1, OP_SEND_CREDIT):
            return False
        lo, cnt = round_share(n, chunk, k)
        if cnt > 0:
            prim.copy_bytes(ch.dst, (rank * slots + k % slots) * chunk + lo, inp,
                            table[ROW * root + SEND_OFF] + k * chunk + lo, cnt, tid, nt)
        _signal(ch, 2 * b, True)
    for _ in range(min(slots, sent)):
        if waited(ch, 2 * b + 1, OP_SEND_CREDIT):
            return False
    return True


@cuda.jit(device=True)
def reduce_at_root(chans, table, inp, out, scratch, chunk, slots, rank, nranks, tid, nt, kind, op):
    """At the root, round k of every rank's data (ours from ``inp``, the peers' from ring slot k % ``slots`` of
    their rings) reduced in rank order into ``out``, thread j waiting for peer j, then a credit to every peer;
    False when a wait failed."""
    b = cuda.blockIdx.x
    n = table[ROW * peer_rank(0, rank) + RECV_N]
    for k in range((n + chunk - 1) // chunk):
        failed = 0
        if tid < nranks - 1 and not sem.wait_for(chans[tid], 2 * b, OP_RECV_DATA):
            failed = 1
        if cuda.syncthreads_or(failed):
            return False
        lo, cnt = round_share(n, chunk, k)
        if cnt > 0:
            at = k * chunk + lo
            red.reduce_slots(out, table[ROW * rank + RECV_OFF] + at, inp, table[ROW * rank + SEND_OFF] + at, rank,
                             scratch, (k % slots) * chunk + lo, slots * chunk, nranks, cnt, tid, nt, kind, op, chans)
        cuda.syncthreads()
        if tid < nranks - 1:
            mc.relaxed_signal(chans[tid], 2 * b + 1)  # a credit: the root wrote nothing of the peer's
    return True


@cuda.jit(device=True)
def copy_own(table, inp, out, rank, tid, nt):
    """Our own send range into our own receive range (a send to ourselves; skipped in place): the cross-host
    exchange's (here ``read_peers`` copies it with the zero-copy receives)."""
    own = table[ROW * rank + SEND_N]
    if own > 0:
        lo, cnt = round_share(own, own, 0)
        if cnt > 0:
            copy_unless_same(out, table[ROW * rank + RECV_OFF] + lo, inp, table[ROW * rank + SEND_OFF] + lo, cnt,
                             tid, nt)


@cuda.jit(device=True)
def copy_reads(table, zc, ins, inp, out, rank, nranks):
    """Our own range (a send to ourselves, skipped in place) and the receives ``zc`` reads zero-copy, in one pass:
    every block copies its part of them laid end to end (``shares.copy_share``), ours first, then what the peers
    we read send us from the peer after us on (so the ranks' blocks read different peers at once), straight from
    their buffers (``ins[j]``, from each one's peer offset)."""
    own = table[ROW * rank + SEND_N]
    total, ranges, smallest = own, 1 if own > 0 else 0, own
    for j in range(min(nranks - 1, ZC_PEERS)):
        n = table[ROW * peer_rank(j, rank) + RECV_N]
        if zero_copy(zc, j, 1) and n > 0:
            smallest = n if ranges == 0 else min(smallest, n)
            total, ranges = total + n, ranges + 1
    if total > 0:
        lo, cnt, t, tn = copy_share(total, ranges, smallest)
        start = 0
        for i in range(nranks):  # ours first (i 0), then the peers we read, from the one after us on
            p = (rank + i) % nranks
            j = peer_index(p, rank) if i > 0 else 0
            if i == 0 or zero_copy(zc, j, 1):
                n = own if i == 0 else table[ROW * p + RECV_N]
                src = inp if i == 0 else ins[j].dst
                at, m = part_of(lo, cnt, start, n)
                if m > 0:  # one copy site for every range: the kernel's code holds the copy loops once
                    copy_unless_same(out, table[ROW * p + RECV_OFF] + at, src,
                                     table[ROW * p + (SEND_OFF if i == 0 else PEER_OFF)] + at, m, t, tn)
                start += n


@cuda.jit(device=True)
def read_peers(chans, table, zc, ins, inp, out, rank, nranks, tid):
    """``copy_reads``, then every block signals each peer it read on semaphore 2 b + 1 (the credit of a stripe that
    pair does not run)."""
    copy_reads(table, zc, ins, inp, out, rank, nranks)
    cuda.syncthreads()
    if tid < nranks - 1 and zero_copy(zc, tid, 1):
        mc.relaxed_signal(chans[tid], 2 * cuda.blockIdx.x + 1)  # a credit: we wrote nothing of the peer's


@cuda.jit(device=True)
def wait_readers(chans, zc, nranks, tid):
    """Each peer that reads our bytes zero-copy has signalled the calling block that its block of the same index
    is done (``read_peers``): our send buffer may be reused."""
    if tid < nranks - 1 and zero_copy(zc, tid, 0):
        sem.wait_for(chans[tid], 2 * cuda.blockIdx.x + 1, OP_READ_DONE)  # a failure is recorded, the call ends
    cuda.syncthreads()


@cuda.jit(device=True)
def staged_rounds(chans, table, zc, inp, out, scratch, chunk, slots, stripes, stripe_bytes, rank, nranks, tid, nt):
    """The rounds of the calling block's staged stripes, then their last credits (a block with none: nothing; a
    failed wait ends them, recorded)."""
    if cuda.blockIdx.x >= stripes_in_call(table, zc, chunk, stripes, stripe_bytes, rank, nranks):
        return
    rounds, lag = staged_rounds_of(table, zc, rank, nranks, chunk), slots - 1
    # step 2k sends round k, step 2k + 1 receives round k - lag: sends run slots - 1 rounds ahead, so a late peer
    # stalls no one's ring; one call of exchange_round, so the kernel holds a round's code once (ptxas: 8 ranks,
    # 169 KB of code and 204 bytes of spills with a call per direction, 141 KB and 136 bytes so)
    for step in range(2 * (rounds + lag)):
        k, receiving = step // 2, step % 2
        if (k >= rounds) if receiving == 0 else (k < lag):
            continue
        if not exchange_round(chans, table, zc, inp, out, scratch, chunk, slots, stripes, stripe_bytes, rank, nranks,
                              k - lag * receiving, receiving, tid, nt):
            return
    drain_stripes(chans, table, zc, chunk, slots, stripes, stripe_bytes, rank, nranks)


@cuda.jit(device=True)
def peer_exchange(chans, areas, area, table, ins, inp, out, scratch, seqs, seen, chunk, slots, stripes, stripe_bytes,
                  rank, nranks, root, kind, op, staged, reduces):
    """One call: the pair check, our own range and the zero-copy receives in one pass (``read_peers``), the wait for
    the peers that read us (each reads right after its pair check, so this waits on nothing staged), then the rounds
    of the block's staged stripes. ``staged`` and ``reduces`` are compile-time constants of the entry kernels:
    ``staged`` 0, every pair reads zero-copy, and the kernel has no rings (nor their registers); ``reduces`` 1, a
    reduce into ``root``, reduced with ``kind`` and ``op`` (only that kernel holds the reductions' code for every
    dtype and op: the others are a fifth of its size)."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    sh = cuda.shared.array(TABLE_WORDS, np.int64)
    fill_table(sh, table)
    table = sh
    agreed, zc = pairs_agree(chans, areas, area, table, seqs, seen, rank, nranks, staged == 0)
    if not agreed:
        return
    if reduces:
        if root == rank:
            reduce_at_root(chans, table, inp, out, scratch, chunk, slots, rank, nranks, tid, nt, kind, op)
        else:
            send_to_root(chans, table, inp, chunk, slots, rank, root, tid, nt)
        return
    read_peers(chans, table, zc, ins, inp, out, rank, nranks, tid)
    wait_readers(chans, zc, nranks, tid)  # first: the rounds then spill far less (ptxas, 128 registers)
    if staged:
        staged_rounds(chans, table, zc, inp, out, scratch, chunk, slots, stripes, stripe_bytes, rank, nranks, tid,
                      nt)


@cuda.jit(cache=True, **SIMPLE_LIMITS)
def peer_exchange_simple(chans, areas, area, table, ins, inp, out, scratch, seqs, seen, chunk, slots, stripes,
                         stripe_bytes, rank, nranks, root, kind, op):
    """``peer_exchange`` of a call that moves bytes (puts, reads of mapped peer buffers and semaphores)."""
    peer_exchange(chans, areas, area, table, ins, inp, out, scratch, seqs, seen, chunk, slots, stripes, stripe_bytes,
                  rank, nranks, root, kind, op, STAGED, 0)


@cuda.jit(cache=True, **SIMPLE_LIMITS)
def peer_read_simple(chans, areas, area, table, ins, inp, out, scratch, seqs, seen, chunk, slots, stripes,
                     stripe_bytes, rank, nranks, root, kind, op):
    """``peer_exchange`` of a call whose every pair reads zero-copy (reads of mapped peer buffers, semaphores)."""
    peer_exchange(chans, areas, area, table, ins, inp, out, scratch, seqs, seen, chunk, slots, stripes, stripe_bytes,
                  rank, nranks, root, kind, op, READS_ONLY, 0)


@cuda.jit(cache=True, **SIMPLE_LIMITS)
def peer_reduce_simple(chans, areas, area, table, ins, inp, out, scratch, seqs, seen, chunk, slots, stripes,
                       stripe_bytes, rank, nranks, root, kind, op):
    """``peer_exchange`` of a reduce into ``root`` (puts into the root's rings, reductions there)."""
    peer_exchange(chans, areas, area, table, ins, inp, out, scratch, seqs, seen, chunk, slots, stripes, stripe_bytes,
                  rank, nranks, root, kind, op, STAGED, 1)
