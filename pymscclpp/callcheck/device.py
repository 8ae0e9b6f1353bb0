"""The call check, device side: before a call writes any output byte or waits for a peer's data, its ranks compare
call fingerprints (``begin_call`` then ``calls_agree`` in a one-shot or two-step kernel; ``checked_call`` in the
executor's and the check kernel; ``call_agreed`` in what runs after the check kernel). Host side:
``callcheck.area``.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..channels import memory_channel as mc
from ..channels import primitives as prim
from ..channels.device_errors import OP_CALLCHECK, record_mismatch
from ..channels.peers import peer_rank
from ..channels.ptx import store_v4_volatile


@cuda.jit(device=True)
def call_seq(call_check):
    """The calling block's sequence number of this call (one more than the last call's, never 0)."""
    return mc.packet_flag_begin(call_check.counts)


@cuda.jit(device=True)
def begin_call(call_check, fingerprint, rank, nranks):
    """The call's sequence number (0 with the check off, ``fingerprint`` 0), loaded once for ``calls_agree``;
    block 0's thread j puts our ``fingerprint`` into slot ``rank`` of peer j's call-check area, flagged with it,
    in the half its parity picks."""
    if fingerprint == 0:
        return 0
    tid = cuda.threadIdx.x
    seq = call_seq(call_check)
    if cuda.blockIdx.x == 0 and tid < nranks - 1:
        f = np.uint32(seq)
        store_v4_volatile(call_check.peers[tid], ((seq % 2) * nranks + rank) * prim.LL16_BYTES,
                          np.uint32(fingerprint & 0xFFFFFFFF), f, np.uint32(fingerprint >> 32), f)
    return seq


@cuda.jit(device=True)
def calls_agree(call_check, fingerprint, seq, rank, nranks):
    """``compare_calls`` of a one-shot kernel (a disagreement found in the call's own kernel)."""
    return compare_calls(call_check, fingerprint, seq, rank, nranks, OP_CALLCHECK)


@cuda.jit(device=True)
def compare_calls(call_check, fingerprint, seq, rank, nranks, op):
    """True on every thread of the block when every peer's call (sequence number ``seq``, from ``begin_call``) has
    our ``fingerprint`` (or the check is off): thread j waits for peer j's packet; a disagreement is recorded
    (MISMATCH, ``op`` saying which kernel found it), as is a failed wait. Then the block stores ``seq`` for the
    next launch, whatever its grid (block b: words b, b + grid, ..., a word per thread)."""
    if fingerprint == 0:
        return True
    tid = cuda.threadIdx.x
    bad = 0
    if tid < nranks - 1:
        p = peer_rank(tid, rank)
        a, c, got = prim.read_packet_ll16_from(call_check.inbox, ((seq % 2) * nranks + p) * prim.LL16_BYTES, seq,
                                               call_check, p, op)
        theirs = (np.int64(c) << np.int64(32)) | np.int64(a)
        if not got:
            bad = 1
        elif theirs != fingerprint:
            record_mismatch(call_check.err, op, rank, p, seq, fingerprint, theirs)
            bad = 1
    bad = cuda.syncthreads_or(bad)  # every thread of the block has read its sequence word
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
    ok = compare_calls(call_check, fingerprint, begin_call(call_check, fingerprint, rank, nranks), rank, nranks, op)
    if cuda.blockIdx.x == 0 and cuda.threadIdx.x == 0:
        call_check.verdict[0] = np.uint32(1 if ok else 0)
    return ok


@cuda.jit(device=True)
def call_agreed(verdict):
    """Whether the call check before this kernel on its stream found every rank's call alike (also True with the
    check off): what a user's kernel tests first, ``verdict`` being ``callcheck(comm).verdict``."""
    return verdict[0] != 0
