"""Two-step kernels for large messages at many ranks, read-based (MSCCL++'s ``rsag``): each rank stages its data in
its own scratch, and peers read what they need from it through their channels, so a byte crosses a link once.
Per round of the message: stage, a barrier with every peer, then reads (and, for all-reduce and broadcast, a
second barrier and a second read step). Shards are 16-byte aligned, one per rank; block b of every rank owns the
same slice of every shard, so per-block semaphores order everything. Scratch halves alternate by per-block flag
parity as in every one-shot kernel on the same lanes; a rank rewrites a half two rounds later, after a barrier
that every reader of its previous use has passed.

Traffic per rank, N the message (all-gather: the gathered output): all-reduce sends and receives 2N(n-1)/n;
all-gather and reduce-scatter N(n-1)/n; broadcast: the root sends 2N(n-1)/n, every other rank receives N; reduce:
N(n-1)/n each way, and the root receives N(n-1)/n more.
"""

from __future__ import annotations

from numba import cuda

from ..channels import memory_channel as mc
from ..channels import primitives as prim
from ..channels import reduce as red
from ..callcheck.device import begin_call, calls_agree
from ..channels.peers import peer_after, peer_index, peer_rank
from .blocks import (agree_and_meet, announce_round, await_round, copy_unless_same, end_round, meet_all,
                     reads_done_and_wait_all, signal_and_wait_all)
from .protocols import SIMPLE, SIMPLE_LIMITS


@cuda.jit(device=True)
def shard_bytes(rem, nranks):
    """Bytes of each rank's shard of a round of ``rem`` bytes (a multiple of 16; the last shard may be shorter)."""
    return ((rem + nranks - 1) // nranks + 15) // 16 * 16


@cuda.jit(device=True)
def shard_slice(rem, full, nranks, s):
    """(offset within the round, offset within the shard, byte count, offset in a scratch laid out for full
    rounds) of the calling block's slice of shard ``s`` of a round of ``rem`` bytes; count <= 0: none. Blocks
    slice every round as a round of ``full`` bytes (the call's first, largest round), so block b reads and
    writes the same scratch bytes in every round of a call, a short last one too: only block b of each peer
    reads them, and within a call its barriers with block b are all that orders the reuse of a scratch half
    (between calls, a rank's next kernel starts once every block of its last one met every peer)."""
    sh = shard_bytes(rem, nranks)
    start = min(s * sh, rem)
    length = min(sh, rem - start)
    nb = cuda.gridDim.x
    full_sh = shard_bytes(full, nranks)
    per = ((full_sh + nb - 1) // nb + 15) // 16 * 16
    lo = min(cuda.blockIdx.x * per, length)
    return start + lo, lo, min(per, length - lo), s * full_sh + lo


@cuda.jit(device=True)
def round_bytes(slot_bytes, nranks, slots):
    """Message bytes per round when a round may use ``slots`` scratch slots: a multiple of 16 per shard."""
    return slots * slot_bytes // (16 * nranks) * (16 * nranks)


@cuda.jit(device=True)
def begin_two_step(flags, nranks, slot_bytes):
    """(flag, scratch half) of the calling block's round: halves of ``nranks`` slots, as every kernel on the lanes."""
    flag = mc.packet_flag_begin(flags)
    return flag, (flag % 2) * nranks * slot_bytes


@cuda.jit(device=True)
def stage_other_shards(scratch, half, inp, base, rem, full, rank, nranks, tid, nt):
    """Copy the block's slice of every shard but ours of a round of ``rem`` bytes at ``base`` of ``inp`` into our
    scratch ``half``, where the rank reducing it reads it."""
    for s in range(nranks):
        at, _, n, held = shard_slice(rem, full, nranks, s)
        if s != rank and n > 0:
            prim.copy_bytes(scratch, half + held, inp, base + at, n, tid, nt)


@cuda.jit(device=True)
def reduce_own_shard(out, at, scratch, held, own, sources, src_off, rank, root, nranks, n, tid, nt, kind, op):
    """Shard ``rank`` of a two-step round, ``n`` bytes at ``at`` of the message: ours from ``own``, every peer's from
    ``sources[j].dst[src_off:]`` (staged copies or mapped inputs), reduced in rank order into ``out`` and
    ``scratch[held:]``, where peers read it (``read_reduced_shards``): an all-reduce's (``root`` -1) both, a
    reduce's root only ``out``, its other ranks only their scratch."""
    dst, dst_off = (scratch, held) if 0 <= root != rank else (out, at)  # one reduction body, whichever it is
    copy, copy_off = (out, at) if root == rank else (scratch, held)
    red.reduce_peers(dst, dst_off, copy, copy_off, own, at, rank, sources, src_off, nranks, n, tid, nt, kind, op)


@cuda.jit(device=True)
def read_reduced_shards(out, base, chans, reduced, rem, full, rank, nranks, root, tid, nt):
    """After every rank's ``reduce_own_shard`` of a round of ``rem`` bytes at ``base`` (and a barrier): every rank
    (``root`` -1), or the root, reads each peer's reduced shard from its scratch (at ``reduced`` + the block's
    offset in the shard) into ``out``."""
    if root >= 0 and rank != root:
        return
    for i in range(nranks - 1):
        j = peer_after(i, rank, nranks)
        at, lo, n, _ = shard_slice(rem, full, nranks, peer_rank(j, rank))
        if n > 0:
            prim.copy_bytes(out, base + at, chans[j].dst, reduced + lo, n, tid, nt)


@cuda.jit(device=True)
def rsag(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks, kind, op, root):
    """Two-shot all-reduce of ``nbytes`` (``root`` -1), or reduce into ``root``: stage the other ranks' shards of our
    input in our scratch; rank r reduces shard r in rank order reading every peer's staged copy (bit-identical
    everywhere: one rank reduces each shard) into ``out`` and its scratch (``reduce_own_shard``); then every rank
    (the root) reads the reduced shards it lacks. Nothing is staged, read or written unless the ranks' calls
    agree."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    seq = begin_call(call_check, fingerprint, rank, nranks)
    if not calls_agree(call_check, fingerprint, seq, rank, nranks):
        return
    rb = round_bytes(slot_bytes, nranks, nranks - 1)  # + a shard of reduced data fits the half's nranks slots
    for base in range(0, nbytes, rb):
        flag, half = begin_two_step(flags, nranks, slot_bytes)
        rem, full = min(rb, nbytes - base), min(nbytes, rb)
        stage_other_shards(scratch, half, inp, base, rem, full, rank, nranks, tid, nt)
        signal_and_wait_all(chans, nranks)
        at, lo, n, held = shard_slice(rem, full, nranks, rank)
        if n > 0:
            reduce_own_shard(out, base + at, scratch, half + rb + lo, inp, chans, half + held, rank, root, nranks, n,
                             tid, nt, kind, op)
        signal_and_wait_all(chans, nranks)
        read_reduced_shards(out, base, chans, half + rb, rem, full, rank, nranks, root, tid, nt)
        end_round(flags, flag)


@cuda.jit(cache=True, **SIMPLE_LIMITS)
def all_reduce_rsag_simple(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks,
                           kind, op):
    """``rsag`` all-reduce (simple protocol: puts and semaphores)."""
    rsag(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks, kind, op, -1)


@cuda.jit(device=True)
def all_reduce_zero_copy(chans, call_check, fingerprint, windows, ins, outs, inp, out, nbytes, rank, nranks, kind, op):
    """Two-shot all-reduce on buffers registered on every rank (``algos.windows``), no scratch: once every rank's
    input is ready, rank r reduces shard r reading every rank's input (``ins[j].dst``) and writes it into every
    rank's output (``outs[j].dst``); a second barrier ends the call when every shard is everywhere and nobody
    reads our input any more."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    if not agree_and_meet(chans, call_check, fingerprint, windows, rank, nranks):
        return
    at, _, n, _ = shard_slice(nbytes, nbytes, nranks, rank)
    if n > 0:
        red.reduce_peers_to_all(out, inp, at, rank, ins, outs, nranks, n, tid, nt, kind, op)
    signal_and_wait_all(chans, nranks)


@cuda.jit(cache=True, **SIMPLE_LIMITS)
def all_reduce_zero_copy_simple(chans, call_check, fingerprint, windows, ins, outs, inp, out, nbytes, rank, nranks,
                                kind, op):
    """``all_reduce_zero_copy`` (simple protocol)."""
    all_reduce_zero_copy(chans, call_check, fingerprint, windows, ins, outs, inp, out, nbytes, rank, nranks, kind, op)


@cuda.jit(device=True)
def all_gather_read(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks):
    """All-gather of ``nbytes`` per rank: stage our data in our scratch, then read every peer's staged data into
    its slot of ``out``; rounds of ``slot_bytes``. One barrier per round: a peer reads round k's stage before it
    signals round k + 1, and the half is rewritten in round k + 2."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    seq = begin_call(call_check, fingerprint, rank, nranks)
    if not calls_agree(call_check, fingerprint, seq, rank, nranks):
        return
    for base in range(0, nbytes, slot_bytes):
        flag, half = begin_two_step(flags, nranks, slot_bytes)
        rem = min(slot_bytes, nbytes - base)
        at, _, n, _ = shard_slice(rem, min(nbytes, slot_bytes), 1, 0)
        if n > 0:
            prim.copy_bytes(scratch, half + at, inp, base + at, n, tid, nt)
            copy_unless_same(out, rank * nbytes + base + at, inp, base + at, n, tid, nt)
        signal_and_wait_all(chans, nranks)
        if n > 0:
            for i in range(nranks - 1):
                j = peer_after(i, rank, nranks)
                prim.copy_bytes(out, peer_rank(j, rank) * nbytes + base + at, chans[j].dst, half + at, n, tid, nt)
        end_round(flags, flag)


@cuda.jit(cache=True, **SIMPLE_LIMITS)
def all_gather_read_simple(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks):
    """``all_gather_read`` (simple protocol)."""
    all_gather_read(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks)


@cuda.jit(device=True)
def reduce_scatter_read(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks,
                        kind, op):
    """Reduce-scatter of ``nbytes`` per rank by reads: stage every slot of our input but our own in our scratch;
    rank r then reduces slot r in rank order, ours from our input and the others read from every peer's staged
    copy, into ``out``. Rounds of ``slot_bytes`` per slot, one barrier each, as ``all_gather_read``."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    seq = begin_call(call_check, fingerprint, rank, nranks)
    if not calls_agree(call_check, fingerprint, seq, rank, nranks):
        return
    for base in range(0, nbytes, slot_bytes):
        flag, half = begin_two_step(flags, nranks, slot_bytes)
        rem = min(slot_bytes, nbytes - base)
        at, _, n, _ = shard_slice(rem, min(nbytes, slot_bytes), 1, 0)
        if n > 0:
            for s in range(nranks):
                if s != rank:
                    prim.copy_bytes(scratch, half + s * slot_bytes + at, inp, s * nbytes + base + at, n, tid, nt)
        signal_and_wait_all(chans, nranks)
        if n > 0:
            red.reduce_peers(out, base + at, out, base + at, inp, rank * nbytes + base + at, rank, chans,
                             half + rank * slot_bytes + at, nranks, n, tid, nt, kind, op)
        end_round(flags, flag)


@cuda.jit(cache=True, **SIMPLE_LIMITS)
def reduce_scatter_read_simple(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank,
                               nranks, kind,
                               op):
    """``reduce_scatter_read`` (simple protocol)."""
    reduce_scatter_read(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks,
                        kind, op)


@cuda.jit(device=True)
def reduce_scatter_zero_copy(chans, call_check, fingerprint, windows, ins, inp, out, nbytes, rank, nranks, kind, op):
    """Reduce-scatter on a send buffer registered on every rank (``algos.windows``), no scratch: once every rank's
    input is ready, rank r reduces slot r reading every rank's input (``ins[j].dst``) into ``out``; a second
    barrier ends the call when nobody reads our input any more."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    if not agree_and_meet(chans, call_check, fingerprint, windows, rank, nranks):
        return
    at, _, n, _ = shard_slice(nbytes, nbytes, 1, 0)
    if n > 0:
        own = rank * nbytes + at
        red.reduce_peers(out, at, out, at, inp, own, rank, ins, own, nranks, n, tid, nt, kind, op)
    reads_done_and_wait_all(chans, nranks)


@cuda.jit(cache=True, **SIMPLE_LIMITS)
def reduce_scatter_zero_copy_simple(chans, call_check, fingerprint, windows, ins, inp, out, nbytes, rank, nranks, kind,
                                    op):
    """``reduce_scatter_zero_copy`` (simple protocol)."""
    reduce_scatter_zero_copy(chans, call_check, fingerprint, windows, ins, inp, out, nbytes, rank, nranks, kind, op)


@cuda.jit(cache=True, **SIMPLE_LIMITS)
def reduce_rsag_simple(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks,
                       kind, op, root):
    """``rsag`` reduce into ``root`` (simple protocol): each rank sends N(n - 1)/n (a non-root also its reduced
    shard) where a root reducing alone would receive (n - 1)N; bit-identical to the all-reduce."""
    rsag(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks, kind, op, root)


@cuda.jit(device=True)
def reduce_zero_copy(chans, call_check, fingerprint, windows, ins, outs, inp, out, scratch, flags, nbytes, slot_bytes,
                     rank, nranks, kind, op, root, push):
    """The ``rsag`` reduce on send buffers mapped on every rank (``algos.windows``): rank r reduces shard r reading
    every rank's input (``ins[j].dst``), nothing staged. ``push`` (a captured call, whose outputs every rank maps
    too: ``outs``): each rank writes its shard straight into the root's output, in one round; else (registered
    send buffers: a non-root cannot know which buffer the root's output is) through the non-roots' scratch, from
    which the root reads them. The barrier after every round's reductions also ends every read of the inputs."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    if not agree_and_meet(chans, call_check, fingerprint, windows, rank, nranks):
        return
    rb = nbytes if push else round_bytes(slot_bytes, nranks, nranks - 1)
    landing = scratch  # where a non-root's reduced shard goes
    if push and rank != root:
        landing = outs[peer_index(root, rank)].dst
    for base in range(0, nbytes, rb):
        flag, half = begin_two_step(flags, nranks, slot_bytes)
        rem, full = min(rb, nbytes - base), min(nbytes, rb)
        at, lo, n, _ = shard_slice(rem, full, nranks, rank)
        if n > 0:
            reduce_own_shard(out, base + at, landing, base + at if push else half + rb + lo, inp, ins, base + at,
                             rank, root, nranks, n, tid, nt, kind, op)
        signal_and_wait_all(chans, nranks)
        if not push:
            read_reduced_shards(out, base, chans, half + rb, rem, full, rank, nranks, root, tid, nt)
        end_round(flags, flag)


@cuda.jit(cache=True, **SIMPLE_LIMITS)
def reduce_zero_copy_simple(chans, call_check, fingerprint, windows, ins, outs, inp, out, scratch, flags, nbytes,
                            slot_bytes, rank, nranks, kind, op, root, push):
    """``reduce_zero_copy`` (simple protocol)."""
    reduce_zero_copy(chans, call_check, fingerprint, windows, ins, outs, inp, out, scratch, flags, nbytes, slot_bytes,
                     rank, nranks, kind, op, root, push)


@cuda.jit(device=True)
def broadcast_scatter_gather(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank,
                             nranks, root):
    """Broadcast as scatter + all-gather: the root stages its data; rank r reads shard r from the root into ``out``
    and its own scratch; then every non-root rank reads each other shard from the rank holding it (the root's own
    shard from the root). The root sends 2N(n-1)/n, not N(n-1)."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    seq = begin_call(call_check, fingerprint, rank, nranks)
    if not calls_agree(call_check, fingerprint, seq, rank, nranks):
        return
    rb = round_bytes(slot_bytes, nranks, nranks)
    src = chans[0]
    for j in range(nranks - 1):
        if peer_rank(j, rank) == root:
            src = chans[j]
    for base in range(0, nbytes, rb):
        flag, half = begin_two_step(flags, nranks, slot_bytes)
        rem = min(rb, nbytes - base)
        if rank == root:
            for s in range(nranks):
                at, _, n, held = shard_slice(rem, min(nbytes, rb), nranks, s)
                if n > 0:
                    prim.copy_bytes(scratch, half + held, inp, base + at, n, tid, nt)
                    copy_unless_same(out, base + at, inp, base + at, n, tid, nt)
        signal_and_wait_all(chans, nranks)
        at, _, n, held = shard_slice(rem, min(nbytes, rb), nranks, rank)
        if rank != root and n > 0:
            prim.copy_bytes(out, base + at, src.dst, half + held, n, tid, nt)
            cuda.syncthreads()  # the copy below may spread the bytes over threads differently
            prim.copy_bytes(scratch, half + held, out, base + at, n, tid, nt)
        signal_and_wait_all(chans, nranks)
        if rank != root:
            for i in range(nranks - 1):
                j = peer_after(i, rank, nranks)
                at, _, n, held = shard_slice(rem, min(nbytes, rb), nranks, peer_rank(j, rank))
                if n > 0:
                    prim.copy_bytes(out, base + at, chans[j].dst, half + held, n, tid, nt)
        end_round(flags, flag)


@cuda.jit(cache=True, **SIMPLE_LIMITS)
def broadcast_scatter_gather_simple(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes,
                                    rank, nranks,
                                    root):
    """``broadcast_scatter_gather`` (simple protocol)."""
    broadcast_scatter_gather(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank,
                             nranks, root)


@cuda.jit(device=True)
def root_keeps_its_own(inp, out, nbytes, tid, nt):
    """A zero-copy broadcast's root: the calling block's share of its input into its own output (skipped in
    place)."""
    at, _, n, _ = shard_slice(nbytes, nbytes, 1, 0)
    if n > 0:
        copy_unless_same(out, at, inp, at, n, tid, nt)


@cuda.jit(device=True)
def broadcast_zero_copy(chans, call_check, fingerprint, windows, ins, outs, inp, out, nbytes, rank, nranks, root):
    """``broadcast_scatter_gather`` on buffers mapped on every rank (``algos.windows``: peers' inputs ``ins``, of
    which a non-root reads the root's, and outputs ``outs``; the same in place), no scratch: once all are ready,
    rank r reads shard r from the root's input into its output and writes it into every other non-root's, the root
    writes its own shard into every peer's, and one barrier ends it: the pulls' bytes (the root sends each shard
    once and its own to every peer) with two meetings, not a third in the middle for each shard's arrival."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    if not agree_and_meet(chans, call_check, fingerprint, windows, rank, nranks):
        return
    at, _, n, _ = shard_slice(nbytes, nbytes, nranks, rank)
    if rank == root:
        root_keeps_its_own(inp, out, nbytes, tid, nt)
    elif n > 0:
        prim.copy_bytes(out, at, ins[peer_index(root, rank)].dst, at, n, tid, nt)
    cuda.syncthreads()  # a non-root's shard is in its output, whichever thread wrote each byte
    src = inp if rank == root else out  # the root's own shard: other blocks of it copy it into its output
    if n > 0:
        for i in range(nranks - 1):
            j = peer_after(i, rank, nranks)
            if peer_rank(j, rank) != root:
                prim.copy_bytes(outs[j].dst, at, src, at, n, tid, nt)
    # every shard is in every output, nobody reads the root's input; a non-root of two ranks wrote no peer's memory
    meet_all(chans, nranks, rank == root or nranks > 2, -1)


@cuda.jit(cache=True, **SIMPLE_LIMITS)
def broadcast_zero_copy_simple(chans, call_check, fingerprint, windows, ins, outs, inp, out, nbytes, rank, nranks,
                               root):
    """``broadcast_zero_copy`` (simple protocol)."""
    broadcast_zero_copy(chans, call_check, fingerprint, windows, ins, outs, inp, out, nbytes, rank, nranks, root)


@cuda.jit(device=True)
def broadcast_push(chans, call_check, fingerprint, windows, outs, inp, out, nbytes, rank, nranks, root):
    """Broadcast by writes into the other ranks' mapped outputs (``outs``), in n - 1 pieces: the root writes piece i
    into the output of the i-th rank after it and signals it; that rank, once signalled, writes its piece into every
    other non-root's output and signals them, and is done when each of them has signalled it. The root sends N once
    (the pulls: about 2N), and a non-root waits on the root, then on the other non-roots."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    if not agree_and_meet(chans, call_check, fingerprint, windows, rank, nranks):
        return
    if rank == root:
        root_keeps_its_own(inp, out, nbytes, tid, nt)
        for i in range(nranks - 1):
            at, _, n, _ = shard_slice(nbytes, nbytes, nranks - 1, i)
            if n > 0:
                prim.copy_bytes(outs[peer_after(i, rank, nranks)].dst, at, inp, at, n, tid, nt)
        announce_round(SIMPLE, chans, nranks)  # nobody reads the root's memory: it is done
        return
    from_root = peer_index(root, rank)
    await_round(SIMPLE, chans[from_root])
    at, _, n, _ = shard_slice(nbytes, nbytes, nranks - 1, (rank - root - 1 + nranks) % nranks)
    if n > 0:
        for i in range(nranks - 1):
            j = peer_after(i, rank, nranks)
            if j != from_root:
                prim.copy_bytes(outs[j].dst, at, out, at, n, tid, nt)
    meet_all(chans, nranks, True, from_root)


@cuda.jit(cache=True, **SIMPLE_LIMITS)
def broadcast_push_zero_copy_simple(chans, call_check, fingerprint, windows, outs, inp, out, nbytes, rank, nranks,
                                    root):
    """``broadcast_push`` (simple protocol)."""
    broadcast_push(chans, call_check, fingerprint, windows, outs, inp, out, nbytes, rank, nranks, root)
