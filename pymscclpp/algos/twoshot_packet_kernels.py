"""Two-step collectives over LL16 packets, for middle sizes at many ranks; one launch each, no barrier: packets
carry their own flags. A scratch half (packet lanes: ``nranks`` slots of ``slot_bytes``) holds an input area and a
result area of ``nranks`` shards of packets each, so a shard is at most ``slot_bytes / 4``.

- The two-shot all-reduce (MSCCL++'s two-shot ``packet``): every rank pushes shard p of its input to rank p, rank r
  reduces shard r in rank order (bit-identical everywhere) and pushes the result to every peer, and every rank
  unpacks the shards it lacks. Each rank sends and receives 2N(n-1)/n of data, twice that on the wire.
- The scatter + all-gather broadcast: the root pushes shard p to rank p and its own shard to every peer; rank p
  unpacks shard p and passes each packet on to every other non-root as it comes; every rank unpacks the shards
  it lacks. The root sends about 2N(n-1)/n of data, not the one-hop packets' N(n-1).
"""

from __future__ import annotations

from numba import cuda

from ..callcheck.device import begin_call, calls_agree
from ..channels import primitives as prim
from ..channels import reduce as red
from ..channels.device_errors import OP_PACKET
from ..channels.peers import peer_index, peer_rank
from .blocks import copy_unless_same, end_round, peer_groups
from .protocols import PACKET, SIMPLE_LIMITS
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
        if n <= 0 or red.reduce_packets_ll16(out, start, inp, start, rank, scratch, half + 2 * lo, wire, nranks, n,
                                             tid, nt, flag, kind, op, chans[0], OP_PACKET, chans,
                                             results + rank * wire + 2 * lo):
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


@cuda.jit(device=True)
def broadcast_packet_two_step(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank,
                              nranks, root):
    """Broadcast of ``nbytes`` (<= ``nranks * slot_bytes / 4``) from ``root`` as a scatter and an all-gather of
    packets; block b of every rank moves the same slice of every shard. Nobody writes a peer's scratch before the
    ranks' calls agree: the root receives nothing, and only the agreement keeps it from a half a slow peer has yet
    to read."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    flag, half = begin_two_step(flags, nranks, slot_bytes)  # before the post (``shares.first_flag``)
    seq = begin_call(call_check, fingerprint, rank, nranks)
    if calls_agree(call_check, fingerprint, seq, rank, nranks):
        wire = 2 * shard_bytes(nbytes, nranks)  # packet bytes of one shard
        results = half + nranks * wire  # the gather area: slot s holds shard s
        first, step, t, gn = peer_groups(PACKET, nranks - 1, tid, nt)
        if rank == root:
            own, own_lo, own_n, _ = shard_slice(nbytes, nbytes, nranks, rank)
            for j in range(first, nranks - 1, step):
                start, lo, n, _ = shard_slice(nbytes, nbytes, nranks, peer_rank(j, rank))
                if n > 0:
                    prim.put_packets_ll16(chans[j].dst, half + rank * wire + 2 * lo, inp, start, n, t, gn, flag)
                if own_n > 0:
                    prim.put_packets_ll16(chans[j].dst, results + rank * wire + 2 * own_lo, inp, own, own_n, t, gn,
                                          flag)
            for s in range(nranks):
                start, _, n, _ = shard_slice(nbytes, nbytes, nranks, s)
                if n > 0:
                    copy_unless_same(out, start, inp, start, n, tid, nt)
        else:
            r = peer_index(root, rank)
            start, lo, n, _ = shard_slice(nbytes, nbytes, nranks, rank)
            if n <= 0 or prim.unpack_forward_packets_ll16(out, start, scratch, half + root * wire + 2 * lo, n, tid, nt,
                                                          flag, chans[r], OP_PACKET, chans, r,
                                                          results + rank * wire + 2 * lo):
                for j in range(first, nranks - 1, step):
                    p = peer_rank(j, rank)
                    start, lo, n, _ = shard_slice(nbytes, nbytes, nranks, p)
                    if n > 0 and not prim.unpack_packets_ll16(out, start, scratch, results + p * wire + 2 * lo, n, t,
                                                              gn, flag, chans[j], OP_PACKET):
                        break
    end_round(flags, flag)


@cuda.jit(cache=True, **SIMPLE_LIMITS)
def broadcast_packet_two_step_ll(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank,
                                 nranks, root):
    """``broadcast_packet_two_step`` (LL16 packets)."""
    broadcast_packet_two_step(chans, call_check, fingerprint, inp, out, scratch, flags, nbytes, slot_bytes, rank,
                              nranks, root)
