"""The per-peer steps every one-shot collective kernel is built from, the protocol a parameter inside each step
(``protocols``; as NCCL's ``Primitives<Proto>``, so kernel bodies carry no protocol branches): the call check's
gates, sending to peers' scratch, the round's synchronisation and credits, receiving (or receive-reducing) from
scratch, and the end of a round (which slice a block owns: ``shares``). Scratch halves alternate by per-block
flag parity. Before a call writes any output byte or waits for a peer's data, its ranks compare call
fingerprints (``callcheck.device``).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..callcheck.device import begin_call, calls_agree, judge_peer, post_call, settle, zero_copy_calls_agree
from ..channels import memory_channel as mc
from ..channels import primitives as prim
from ..channels import reduce as red
from ..channels.device_errors import OP_CALLCHECK, OP_PACKET, QUIET
from ..channels.peers import peer_after, peer_rank
from ..channels.ptx import address_of
from ..runtime.backend import IS_SIM
from .protocols import PACKET, SIMPLE, scale
from .shares import begin, first_flag

# ``peer_groups``' unit: a warp on the GPU; on the simulator, whose blocks have 32 threads, a quarter of one, so
# its tests split blocks by peer too
GROUP_THREADS = 8 if IS_SIM else 32


@cuda.jit(device=True)
def open_call(proto, call_check, fingerprint, flags, rank, nranks):
    """The start of a round-based kernel: (the block's first flag, the call's sequence number, whether it may send,
    ``agreed_before_sending``), the flag loaded before the call's fingerprint is posted (``shares.first_flag``)."""
    flag = first_flag(flags)
    seq = begin_call(call_check, fingerprint, rank, nranks)
    return flag, seq, agreed_before_sending(proto, call_check, fingerprint, seq, rank, nranks)


@cuda.jit(device=True)
def copy_unless_same(dst, dst_off, src, src_off, nbytes, tid, nthreads):
    """``copy_bytes``, skipped when source and destination are the same memory (in place)."""
    if address_of(dst, dst_off) != address_of(src, src_off):
        prim.copy_bytes(dst, dst_off, src, src_off, nbytes, tid, nthreads)


@cuda.jit(device=True)
def signal_and_wait_all(chans, nranks):
    """After the block's puts: signal every peer on the block's semaphore, then wait for every peer's signal."""
    meet_all(chans, nranks, True, -1)


@cuda.jit(device=True)
def reads_done_and_wait_all(chans, nranks):
    """After a block that wrote nothing into peers' memory (it only read theirs): ``signal_and_wait_all`` with
    signals that order no writes (a credit, as a receiver's: no system-scope release to wait for)."""
    meet_all(chans, nranks, False, -1)


@cuda.jit(device=True)
def meet_all(chans, nranks, release, skip):
    """Signal every peer but ``chans[skip]`` (-1: none) on the block's semaphore (``release``: our earlier writes
    visible to it first), then wait for each one's signal."""
    signal_peers(chans, nranks, release, skip)
    wait_peers(chans, nranks, skip)


@cuda.jit(device=True)
def signal_peers(chans, nranks, release, skip):
    """Once every thread of the block is done, signal every peer but ``chans[skip]`` (-1: none) on the block's
    semaphore (``release``: our earlier writes visible to it first); thread j signals peer j."""
    cuda.syncthreads()
    tid = cuda.threadIdx.x
    if tid < nranks - 1 and tid != skip:
        mc.signal_as(chans[tid], cuda.blockIdx.x, release)


@cuda.jit(device=True)
def wait_peers(chans, nranks, skip):
    """Wait for the signal of every peer but ``chans[skip]`` (-1: none) on the block's semaphore (thread j waits
    for peer j, after its own signal to it, if any), then go on together."""
    tid = cuda.threadIdx.x
    if tid < nranks - 1 and tid != skip:
        mc.wait(chans[tid], cuda.blockIdx.x)
    cuda.syncthreads()


@cuda.jit(device=True)
def agreed_before_sending(proto, call_check, fingerprint, seq, rank, nranks):
    """Whether a round-based kernel may send: simple rounds check the call before their first put (packets land
    only in peers' scratch, so they are checked before anything is received)."""
    return proto == PACKET or calls_agree(call_check, fingerprint, seq, rank, nranks)


@cuda.jit(device=True)
def agreed_before_receiving(proto, call_check, fingerprint, seq, rank, nranks):
    """Whether a round-based kernel may receive (and write its output): packets check the call here, simple
    rounds did before sending."""
    return proto != PACKET or calls_agree(call_check, fingerprint, seq, rank, nranks)


@cuda.jit(device=True)
def agree_and_meet(chans, call_check, fingerprint, windows, rank, nranks):
    """The start of a zero-copy kernel: post the call's fingerprint and ``windows`` (the registrations of the buffers
    it maps, ``fingerprint.windows_tag``) and, once every rank's call agrees, go on with every peer's buffers ready
    to be read and written; False, with nothing touched, when the calls differ. Every
    block has then read every peer's fingerprint of this call, which a peer posts once its kernel has started
    (so the work before it on its stream is done, and its last call's final barrier passed): that is the meeting.
    With the check off (``fingerprint`` 0) the block meets every peer by a barrier instead."""
    seq = post_call(call_check, fingerprint, windows, rank, nranks)
    return meet_when_posted(chans, call_check, fingerprint, windows, seq, rank, nranks)


@cuda.jit(device=True)
def meet_when_posted(chans, call_check, fingerprint, windows, seq, rank, nranks):
    """``agree_and_meet`` once ``post_call`` has posted the call (``seq``): a kernel may do local work between the
    two while its fingerprint travels."""
    if not zero_copy_calls_agree(call_check, fingerprint, windows, seq, rank, nranks):
        return False
    if fingerprint == 0:
        signal_and_wait_all(chans, nranks)
    return True


@cuda.jit(device=True)
def first_credits(proto, ch, nrounds):
    """A receiver's credits to its sender at the start of a launch (thread 0): packets, one for the launch;
    simple, one per scratch half its first two rounds use. Credits order no writes (relaxed)."""
    for _ in range(1 if proto == PACKET else min(nrounds, 2)):
        mc.relaxed_signal(ch, cuda.blockIdx.x)


@cuda.jit(device=True)
def announce_round(proto, chans, nranks):
    """After a sender's round: simple signals every receiver that the round is in its scratch; packets carry
    their own flags."""
    if proto == SIMPLE:
        cuda.syncthreads()
        if cuda.threadIdx.x < nranks - 1:
            mc.signal(chans[cuda.threadIdx.x], cuda.blockIdx.x)


@cuda.jit(device=True)
def await_round(proto, ch):
    """Before a receiver reads a round: simple waits for the sender's signal; packets wait per packet."""
    if proto == SIMPLE:
        if cuda.threadIdx.x == 0:
            mc.wait(ch, cuda.blockIdx.x)
        cuda.syncthreads()


@cuda.jit(device=True)
def return_credit(proto, ch, rd, nrounds):
    """After a receiver read round ``rd``: simple hands its half back for round ``rd + 2``, if there is one;
    a packet launch's credit went at its start. It orders no writes: what the block wrote is its own output."""
    if proto == SIMPLE:
        cuda.syncthreads()
        if cuda.threadIdx.x == 0 and rd + 2 < nrounds:
            mc.relaxed_signal(ch, cuda.blockIdx.x)


@cuda.jit(device=True)
def end_round(flags, flag):
    """Store the block's flag once all its threads are done (the next launch starts from it); the next round's."""
    cuda.syncthreads()
    mc.packet_flag_end(flags, flag)
    cuda.syncthreads()
    return prim.next_flag(flag)


@cuda.jit(device=True)
def send(proto, dst, dst_off, src, src_off, n, tid, nthreads, flag):
    """Move ``n`` bytes of ``src`` into scratch ``dst`` (a peer's): as packets, or as they are."""
    if proto == PACKET:
        prim.put_packets_ll16(dst, dst_off, src, src_off, n, tid, nthreads, flag)
    else:
        prim.copy_bytes(dst, dst_off, src, src_off, n, tid, nthreads)


@cuda.jit(device=True)
def peer_groups(proto, npeers, tid, nthreads):
    """(first peer index, step, thread index in its group, the group's threads) of a loop over ``npeers`` peers.
    Packets give each peer a group of whole ``GROUP_THREADS`` units (a group takes every ``step``-th peer when units
    are fewer than peers), so a thread's round trips to different peers overlap (docs/algorithms.md); simple rounds
    keep the whole block on each peer."""
    units = nthreads // GROUP_THREADS
    groups = min(npeers, units)
    if proto != PACKET or groups <= 1:
        return 0, 1, tid, nthreads
    size = units // groups * GROUP_THREADS
    g = tid // size
    if g >= groups:
        return npeers, 1, 0, size
    return g, groups, tid - g * size, size


@cuda.jit(device=True)
def send_to_peers(proto, chans, dst_off, src, src_off, send_stride, rank, nranks, n, tid, nthreads, flag):
    """``send`` ``n`` bytes into every peer's scratch at ``dst_off`` (``peer_after`` order, ``peer_groups``): peer
    p's from ``src[p * send_stride + src_off:]``."""
    first, step, t, nt = peer_groups(proto, nranks - 1, tid, nthreads)
    for i in range(first, nranks - 1, step):
        j = peer_after(i, rank, nranks)
        send(proto, chans[j].dst, dst_off, src, peer_rank(j, rank) * send_stride + src_off, n, t, nt, flag)


@cuda.jit(device=True)
def receive(proto, dst, dst_off, scratch, off, n, tid, nthreads, flag, ch):
    """Move ``n`` bytes a peer sent into our ``scratch`` at ``off`` to ``dst``: waiting for its packets (errors
    recorded in ``ch``), or copying after the round's signal."""
    if proto == PACKET:
        prim.unpack_packets_ll16(dst, dst_off, scratch, off, n, tid, nthreads, flag, ch, OP_PACKET)
    else:
        prim.copy_bytes(dst, dst_off, scratch, off, n, tid, nthreads)


@cuda.jit(device=True)
def agree_and_receive_reduce(proto, call_check, fingerprint, seq, chans, out, at, inp, own_off, rank, scratch, base,
                             slot_bytes, nranks, n, tid, nt, flag, kind, op):
    """``out[at:]`` = every rank's slot reduced in rank order, in one pass, once the ranks' calls agree: ours from
    ``inp[own_off:]``, slot r from our scratch at ``base + r * slot_bytes``. Packets: ``receive_reduce_packets``;
    simple rounds, checked before sending, after the round's signals."""
    if proto == PACKET:
        receive_reduce_packets(call_check, fingerprint, seq, chans, out, at, inp, own_off, rank, scratch, base,
                               slot_bytes, nranks, n, tid, nt, flag, kind, op)
    elif agreed_before_receiving(proto, call_check, fingerprint, seq, rank, nranks):
        sync_round(proto, chans, nranks)
        if n > 0:
            red.reduce_slots(out, at, inp, own_off, rank, scratch, base, slot_bytes, nranks, n, tid, nt, kind, op,
                             chans)


# a block that awaits at most this many packets from all its peers together waits for its first ones while its
# call is judged; one that awaits more, after the verdict: at 8 ranks on one GPU, 128 packets a block spinning
# before it (16 KB) slowed every rank 3-8x (docs/performance.md)
OVERLAP_PACKETS = 256


@cuda.jit(device=True)
def receive_reduce_packets(call_check, fingerprint, seq, chans, out, at, inp, own_off, rank, scratch, base,
                           slot_bytes, nranks, n, tid, nt, flag, kind, op):
    """The packet path of ``agree_and_receive_reduce``: the block's last threads judge the peers' fingerprints
    (``judge_peer``) while, in a block of at most ``OVERLAP_PACKETS`` packets from its peers, each thread waits for
    and reduces (holds) its first packet, quietly (a mismatch or a judge's timeout ends the wait and is the one
    reported; else the block reports a failed one); nothing is written until the block has settled that every call
    agrees, then packet after packet as they come."""
    npkt = (n + prim.LL16_DATA - 1) // prim.LL16_DATA if n > 0 else 0
    overlap = npkt * (nranks - 1) <= OVERLAP_PACKETS
    judge = nt - 1 - tid
    bad = judge_peer(call_check, fingerprint, 0, seq, rank, nranks, OP_CALLCHECK, judge) \
        if fingerprint != 0 and judge < nranks - 1 else 0
    a0, a1 = np.uint32(0), np.uint32(0)
    i = tid
    first = True
    while True:
        failed = -1
        if i < npkt and bad == 0 and (overlap or not first):
            a0, a1, failed = red.reduce_packet_ll16(i, inp, own_off, rank, scratch, base, slot_bytes, nranks, n, flag,
                                                    kind, op, chans[0], OP_PACKET + (QUIET if first else 0))
        if first:
            first = False
            if not settle(call_check, fingerprint, seq, 0 if bad == 0 and failed < 0 else 1):
                if failed >= 0:  # unless a judge's wait is reported (every thread has passed the settle)
                    prim.report_packet_ll16(scratch, base + failed * slot_bytes + i * prim.LL16_BYTES, flag,
                                            chans[0], failed, OP_PACKET)
                return
            if not overlap:
                continue  # its first packet, now that the calls agree
        if i >= npkt or failed >= 0:
            return
        red.put_packet_result(out, at, i, a0, a1, n)
        i += nt


@cuda.jit(device=True)
def sync_round(proto, chans, nranks):
    """Between sending and receiving: simple signals and waits every peer; packets carry their own flags."""
    if proto == PACKET:
        cuda.syncthreads()
    else:
        signal_and_wait_all(chans, nranks)


@cuda.jit(device=True)
def begin_and_send(proto, chans, flag, inp, nbytes, slot_bytes, rd, rank, nranks, send_stride, tid, nthreads):
    """``begin`` round ``rd`` and ``send_to_peers`` the block's slice into slot ``rank`` of every peer's scratch;
    (scratch half, first byte within the round, byte count, first byte of the buffer)."""
    half, lo, n, at = begin(proto, flag, nbytes, slot_bytes, rd, nranks)
    if n > 0:
        send_to_peers(proto, chans, half + rank * slot_bytes + scale(proto) * lo, inp, at, send_stride, rank, nranks,
                      n, tid, nthreads, flag)
    return half, lo, n, at
