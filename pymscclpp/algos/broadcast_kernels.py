"""Broadcast kernels: the root puts its data into every peer's scratch (one slot per half), each peer copies it
out. Peers hand the root a credit per scratch half they have freed, so the root never overwrites data a slow
peer has yet to read, whichever rank was root before. Block shares as in ``allgather_kernels``.
"""

from __future__ import annotations

from numba import cuda

from ..channels import memory_channel as mc
from ..channels import primitives as prim
from ..channels.device_errors import OP_PACKET
from .blocks import begin_packets, begin_round, copy_unless_same, end_round, peer_index


@cuda.jit
def broadcast_packets(chans, inp, out, scratch, flags, nbytes, slot_bytes, rank, nranks, root):
    """LL16 broadcast: a peer signals it is ready (its last launch is over), the root puts packets to it."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    b = cuda.blockIdx.x
    flag, half, lo, n = begin_packets(flags, nbytes, slot_bytes, 1)
    if rank == root:
        if tid < nranks - 1:
            mc.wait(chans[tid], b)
        cuda.syncthreads()
        if n > 0:
            for j in range(nranks - 1):
                prim.put_packets_ll16(chans[j].dst, half + 2 * lo, inp, lo, n, tid, nt, flag)
            copy_unless_same(out, lo, inp, lo, n, tid, nt)
    else:
        ch = chans[peer_index(root, rank)]
        if tid == 0:
            mc.signal(ch, b)
        if n > 0:
            prim.unpack_packets_ll16(out, lo, scratch, half + 2 * lo, n, tid, nt, flag,
                                     ch.timeout_ns, ch.err, ch.abort, ch.rank, ch.peer, ch.channel, OP_PACKET)
    end_round(flags, flag)


@cuda.jit
def broadcast_simple(chans, inp, out, scratch, flags, nbytes, round_bytes, rank, nranks, root):
    """Put-and-signal broadcast in rounds of ``round_bytes``: the root puts round r into a half once the peer's
    credit for it (given at the start for the first two rounds, then after reading round r - 2) has come."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    b = cuda.blockIdx.x
    nrounds = (nbytes + round_bytes - 1) // round_bytes
    if rank != root and tid == 0:
        for _ in range(min(nrounds, 2)):
            mc.signal(chans[peer_index(root, rank)], b)
    for rd in range(nrounds):
        flag, half, lo, n, at = begin_round(flags, nbytes, round_bytes, rd, 1)
        if rank == root:
            if tid < nranks - 1:
                mc.wait(chans[tid], b)
            cuda.syncthreads()
            for j in range(nranks - 1):
                prim.copy_bytes(chans[j].dst, half + lo, inp, at, n, tid, nt)
            copy_unless_same(out, at, inp, at, n, tid, nt)
            cuda.syncthreads()
            if tid < nranks - 1:
                mc.signal(chans[tid], b)
        else:
            ch = chans[peer_index(root, rank)]
            if tid == 0:
                mc.wait(ch, b)
            cuda.syncthreads()
            prim.copy_bytes(out, at, scratch, half + lo, n, tid, nt)
            cuda.syncthreads()
            if tid == 0 and rd + 2 < nrounds:
                mc.signal(ch, b)
        end_round(flags, flag)
