"""The call check, device side: before a call writes any output byte or waits for a peer's data, its ranks compare
call fingerprints (``begin_call`` then ``calls_agree`` in a one-shot or two-step kernel; ``post_call`` then
``zero_copy_calls_agree``, with the registrations of the buffers it maps, in a zero-copy one; ``checked_call`` in
the executor's and the check kernel; ``call_agreed`` in what runs after the check kernel). Host side:
``callcheck.area``.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..channels import memory_channel as mc
from ..channels import primitives as prim
from ..channels.device_errors import OP_CALLCHECK, OP_WINDOWS, record_mismatch
from ..channels.peers import peer_rank
from ..channels.ptx import store_v4_volatile


@cuda.jit(device=True)
def call_seq(call_check):
    """The calling block's sequence number of this call (one more than the last call's, never 0)."""
    return mc.packet_flag_begin(call_check.counts)


SLOT_BYTES = 2 * prim.LL16_BYTES  # a rank's slot in the area: its fingerprint packet, then a zero-copy call's tag


@cuda.jit(device=True)
def slot_of(seq, rank, nranks):
    """Byte offset of rank ``rank``'s slot for call ``seq`` (the half its parity picks)."""
    return ((seq % 2) * nranks + rank) * SLOT_BYTES


@cuda.jit(device=True)
def _post_word(area, at, word, seq):
    """The int64 ``word`` as the LL16 packet at ``at`` of a peer's ``area``, flagged ``seq``."""
    f = np.uint32(seq)
    store_v4_volatile(area, at, np.uint32(word & 0xFFFFFFFF), f, np.uint32(word >> 32), f)


@cuda.jit(device=True)
def _read_word(call_check, at, seq, peer, op):
    """(the int64 of the LL16 packet at ``at`` of our area once ``peer`` flagged it ``seq``, whether it came)."""
    a, c, got = prim.read_packet_ll16_from(call_check.inbox, at, seq, call_check, peer, op)
    return (np.int64(c) << np.int64(32)) | np.int64(a), got


@cuda.jit(device=True)
def begin_call(call_check, fingerprint, rank, nranks):
    """``post_call`` of a call that maps no peer buffers of its own."""
    return post_call(call_check, fingerprint, 0, rank, nranks)


@cuda.jit(device=True)
def post_call(call_check, fingerprint, tag, rank, nranks):
    """The call's sequence number (0 with the check off, ``fingerprint`` 0), loaded once for ``compare_calls``;
    block 0's thread j puts our ``fingerprint`` into slot ``rank`` of peer j's call-check area, flagged with it,
    and a zero-copy call's windows ``tag`` (nonzero, ``fingerprint.windows_tag``) into the slot's second packet."""
    if fingerprint == 0:
        return 0
    tid = cuda.threadIdx.x
    seq = call_seq(call_check)
    if cuda.blockIdx.x == 0 and tid < nranks - 1:
        at = slot_of(seq, rank, nranks)
        if tag != 0:
            _post_word(call_check.peers[tid], at + prim.LL16_BYTES, tag, seq)
        _post_word(call_check.peers[tid], at, fingerprint, seq)
    return seq


@cuda.jit(device=True)
def calls_agree(call_check, fingerprint, seq, rank, nranks):
    """``compare_calls`` of a one-shot kernel (a disagreement found in the call's own kernel)."""
    return compare_calls(call_check, fingerprint, 0, seq, rank, nranks, OP_CALLCHECK)


@cuda.jit(device=True)
def zero_copy_calls_agree(call_check, fingerprint, tag, seq, rank, nranks):
    """The call check of a zero-copy kernel once ``post_call`` has posted it with its windows ``tag`` (``seq``):
    ``compare_calls``."""
    return compare_calls(call_check, fingerprint, tag, seq, rank, nranks, OP_CALLCHECK)


@cuda.jit(device=True)
def compare_calls(call_check, fingerprint, tag, seq, rank, nranks, op):
    """True on every thread of the block when every peer's call (sequence number ``seq``, from ``post_call``) has
    our ``fingerprint`` (or the check is off) and, ``tag`` nonzero, our windows tag: thread j judges peer j
    (``judge_peer``), then the block ``settle``s."""
    if fingerprint == 0:
        return True
    tid = cuda.threadIdx.x
    bad = judge_peer(call_check, fingerprint, tag, seq, rank, nranks, op, tid) if tid < nranks - 1 else 0
    return settle(call_check, fingerprint, seq, bad)


@cuda.jit(device=True)
def judge_peer(call_check, fingerprint, tag, seq, rank, nranks, op, j):
    """1 unless the j-th peer's call ``seq`` has our ``fingerprint`` (a peer whose fingerprint agrees made the same
    zero-copy call, so it posted one) and, ``tag`` nonzero, our windows tag: waits for its packets; a
    disagreement is recorded (MISMATCH, ``op`` saying which kernel found it; OP_WINDOWS for the tags), as is a
    failed wait, so the block's other waits end too (``device_errors.aborted``)."""
    p = peer_rank(j, rank)
    at = slot_of(seq, p, nranks)
    theirs, got = _read_word(call_check, at, seq, p, op)
    if got and theirs != fingerprint:
        record_mismatch(call_check.err, op, rank, p, seq, fingerprint, theirs)
        got = False
    elif got and tag != 0:
        theirs, got = _read_word(call_check, at + prim.LL16_BYTES, seq, p, op)
        if got and theirs != tag:
            record_mismatch(call_check.err, OP_WINDOWS, rank, p, seq, tag, theirs)
            got = False
    return 0 if got else 1


@cuda.jit(device=True)
def settle(call_check, fingerprint, seq, bad):
    """True on every thread of the block when none of its threads found its call ``bad``; then the block stores
    ``seq`` for the next launch, whatever its grid (block b: words b, b + grid, ..., a word per thread). With the
    check off (``fingerprint`` 0) only the block's verdict."""
    bad = cuda.syncthreads_or(bad)  # every thread of the block has read its sequence word
    if fingerprint == 0:
        return bad == 0
    tid = cuda.threadIdx.x
    k = cuda.blockIdx.x + tid * cuda.gridDim.x
    while k < call_check.counts.size:
        call_check.counts[k] = seq
        k += cuda.gridDim.x * cuda.blockDim.x
    return bad == 0


@cuda.jit(device=True)
def checked_call(call_check, fingerprint, rank, nranks, op):
    """``begin_call`` then ``compare_calls``, in a kernel that is not a one-shot one (every block calls it first);
    block 0's thread 0 also stores the verdict in ``call_check.verdict`` for what runs after the kernel on its
    stream."""
    ok = compare_calls(call_check, fingerprint, 0, begin_call(call_check, fingerprint, rank, nranks), rank, nranks, op)
    if cuda.blockIdx.x == 0 and cuda.threadIdx.x == 0:
        call_check.verdict[0] = np.uint32(1 if ok else 0)
    return ok


@cuda.jit(device=True)
def call_agreed(verdict):
    """Whether the call check before this kernel on its stream found every rank's call alike (also True with the
    check off): what a user's kernel tests first, ``verdict`` being ``callcheck(comm).verdict``."""
    return verdict[0] != 0
