"""The two-shot all-reduce over LL16 packets (MSCCL++'s two-shot ``packet``), for middle sizes at many ranks: every
rank pushes shard p of its input to rank p as packets, rank r reduces shard r in rank order (bit-identical
everywhere) and pushes the result to every peer as packets, and every rank unpacks the shards it lacks. One launch,
no barrier: packets carry their own flags. A scratch half (packet lanes: ``nranks`` slots of ``slot_bytes``) holds
an input area and a result area of ``nranks`` shards of packets each, so a shard is at most ``slot_bytes / 4``.
Each rank sends and receives 2N(n-1)/n of data, twice that on the wire.
"""

from __future__ import annotations

from numba import cuda

from ..callcheck.device import begin_call, calls_agree
from ..channels import primitives as prim
from ..channels import reduce as red
from ..channels.device_errors import OP_PACKET
from ..channels.peers import peer_rank
from .blocks import end_round, peer_groups
from .protocols import PACKET
from .twoshot_kernels import begin_two_step, shard_bytes, shard_slice


@cuda.jit(device=True)
def all_reduce_packet_two_shot(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank,
                               nranks, kind, op):
    """Two-shot all-reduce of ``nbytes`` (<= ``nranks * slot_bytes / 4``) in one hop of packets each way; block b
    of every rank owns the same slice of every shard. Packets go only into scratch until the ranks' calls agree."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    flag, half = begin_two_step(flags, nranks, slot_bytes)  # before the post (``shares.first_flag``)
    seq = begin_call(call_check, fingerprint, rank, nranks)
    wire = 2 * shard_bytes(nbytes, nranks)  # packet bytes of one shard
    results = half + nranks * wire  # the result area: slot s holds rank s's reduced shard
    first, step, t, gn = peer_groups(PACKET, nranks - 1, tid, nt)
    for j in range(first, nranks - 1, step):
        start, lo, n, _ = shard_slice(nbytes, nbytes, nranks, peer_rank(j, rank))
        if n > 0:
            prim.put_packets_ll16(chans[j].dst, half + rank * wire + 2 * lo, inp, start, n, t, gn, flag)
    if calls_agree(call_check, fingerprint, seq, rank, nranks):
        start, lo, n, _ = shard_slice(nbytes, nbytes, nranks, rank)
        reduced = n <= 0 or red.reduce_packets_ll16(out, start, inp, start, rank, scratch, half + 2 * lo, wire,
                                                    nranks, n, tid, nt, flag, kind, op, chans[0], OP_PACKET)
        if reduced:
            if n > 0:  # each thread re-reads the very words it just wrote: no barrier needed
                for j in range(nranks - 1):
                    prim.put_packets_ll16(chans[j].dst, results + rank * wire + 2 * lo, out, start, n, tid, nt,
                                          flag)
            for j in range(first, nranks - 1, step):
                p = peer_rank(j, rank)
                start, lo, n, _ = shard_slice(nbytes, nbytes, nranks, p)
                if n > 0 and not prim.unpack_packets_ll16(out, start, scratch, results + p * wire + 2 * lo, n, t, gn,
                                                          flag, chans[j], OP_PACKET):
                    break
    end_round(flags, flag)


@cuda.jit(cache=True)
def all_reduce_packet_two_shot_ll(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank,
                                  nranks, kind,
                                  op):
    """``all_reduce_packet_two_shot`` (LL16 packets)."""
    all_reduce_packet_two_shot(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank,
                               nranks, kind, op)
