"""The broadcast kernel: the root sends its data into every peer's scratch (one slot per half), each peer
copies it out; the protocol a compile-time parameter (one body, an entry kernel per protocol). Peers hand the
root a credit per scratch half they have freed, so the root never overwrites data a slow peer has yet to read,
whichever rank was root before.
"""

from __future__ import annotations

from numba import cuda

from ..channels import memory_channel as mc
from ..callcheck.device import begin_call, calls_agree
from ..channels.peers import peer_index
from .blocks import (announce_round, await_round, copy_unless_same, end_round, first_credits, peer_groups, receive,
                     return_credit, send)
from .protocols import PACKET, SIMPLE_LIMITS, SIMPLE, rounds, scale
from .shares import begin, first_flag


@cuda.jit(device=True)
def broadcast(proto, chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks, root):
    """The root sends each round once every peer's credit for its half has come (packets: a peer's launch
    began; simple: it read round r - 2); peers receive it into ``out``. Nobody waits for a peer or writes
    ``out`` before the ranks' calls agree."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    b = cuda.blockIdx.x
    scratch_scale = scale(proto)
    nrounds = rounds(proto, nbytes, slot_bytes)
    flag = first_flag(flags)
    seq = begin_call(call_check, fingerprint, rank, nranks)
    if rank != root and tid == 0:
        first_credits(proto, chans[peer_index(root, rank)], nrounds)
    # before the root waits for credits or anybody writes ``out``
    if not calls_agree(call_check, fingerprint, seq, rank, nranks):
        return
    for rd in range(nrounds):
        # halves of ``nranks`` slots, as every one-shot algorithm sharing this scratch lays them out (the root uses
        # slot 0): a half is never reused by the very next launch, whichever algorithm that is
        half, lo, n, at = begin(proto, flag, nbytes, slot_bytes, rd, nranks)
        if rank == root:
            if tid < nranks - 1:
                mc.wait(chans[tid], b)
            cuda.syncthreads()
            if n > 0:
                first, step, t, gn = peer_groups(proto, nranks - 1, tid, nt)
                for j in range(first, nranks - 1, step):
                    send(proto, chans[j].dst, half + scratch_scale * lo, inp, at, n, t, gn, flag)
                copy_unless_same(out, at, inp, at, n, tid, nt)
            announce_round(proto, chans, nranks)
        else:
            ch = chans[peer_index(root, rank)]
            await_round(proto, ch)
            if n > 0:
                receive(proto, out, at, scratch, half + scratch_scale * lo, n, tid, nt, flag, ch)
            return_credit(proto, ch, rd, nrounds)
        flag = end_round(flags, flag)


@cuda.jit(cache=True)
def broadcast_ll(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks, root):
    """``broadcast`` with LL16 packets."""
    broadcast(PACKET, chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks, root)


@cuda.jit(cache=True, **SIMPLE_LIMITS)
def broadcast_simple(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks, root):
    """``broadcast`` with the simple protocol."""
    broadcast(SIMPLE, chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks, root)
