"""Zero-copy reductions of two ranks by writes only: each rank first writes the peer's part of its input into the
peer's mapped output, then reduces its own part there in place (a rank's reads stay local; on NVLink a write is
posted while a read waits a round trip). Out of place only: the peer's output must not be an input it still
reads. Block b of both ranks owns the same slice (``twoshot_kernels.shard_slice``); per-block barriers order it.
"""

from __future__ import annotations

from numba import cuda

from ..channels import primitives as prim
from ..channels import reduce as red
from .blocks import agree_and_meet, signal_and_wait_all
from .protocols import SIMPLE_LIMITS
from .twoshot_kernels import shard_slice


@cuda.jit(device=True)
def reduce_pair(chans, outs, inp, own_off, out, at, rank, n, fan_out, kind, op):
    """``out[at:]`` = both ranks' data in rank order (ours from ``inp[own_off:]``, the peer's already written
    into ``out[at:]``), in one pass; with ``fan_out`` written into the peer's output ``outs[0].dst`` too."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    red.reduce_sources(out, at, out, at, inp, own_off, rank, out, at, 0, chans, False, outs, fan_out, 2, n, tid, nt,
                       kind, op)


@cuda.jit(device=True)
def reduce_scatter_push(chans, call_check, fingerprint, windows, outs, inp, out, nbytes, rank, nranks, kind, op):
    """Reduce-scatter of two ranks: write the peer's slot of ``inp`` into its output (``outs[0].dst``); after a
    barrier reduce ours with what the peer wrote into ``out``; a last barrier ends the call."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    if not agree_and_meet(chans, call_check, fingerprint, windows, rank, nranks):
        return
    at, _, n, _ = shard_slice(nbytes, nbytes, 1, 0)
    if n > 0:
        prim.copy_bytes(outs[0].dst, at, inp, (1 - rank) * nbytes + at, n, tid, nt)
    signal_and_wait_all(chans, nranks)
    if n > 0:
        reduce_pair(chans, outs, inp, rank * nbytes + at, out, at, rank, n, False, kind, op)
    signal_and_wait_all(chans, nranks)


@cuda.jit(cache=True, **SIMPLE_LIMITS)
def reduce_scatter_push_zero_copy_simple(chans, call_check, fingerprint, windows, outs, inp, out, nbytes, rank,
                                         nranks, kind, op):
    """``reduce_scatter_push`` (simple protocol)."""
    reduce_scatter_push(chans, call_check, fingerprint, windows, outs, inp, out, nbytes, rank, nranks, kind, op)


@cuda.jit(device=True)
def all_reduce_push(chans, call_check, fingerprint, windows, outs, inp, out, nbytes, rank, nranks, kind, op):
    """All-reduce of two ranks: write the peer's shard of ``inp`` into its output; after a barrier reduce our
    shard with what the peer wrote into ``out`` and write the result into both outputs; a last barrier ends the
    call when both shards are everywhere."""
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    if not agree_and_meet(chans, call_check, fingerprint, windows, rank, nranks):
        return
    at, _, n, _ = shard_slice(nbytes, nbytes, 2, 1 - rank)
    if n > 0:
        prim.copy_bytes(outs[0].dst, at, inp, at, n, tid, nt)
    signal_and_wait_all(chans, nranks)
    at, _, n, _ = shard_slice(nbytes, nbytes, 2, rank)
    if n > 0:
        reduce_pair(chans, outs, inp, at, out, at, rank, n, True, kind, op)
    signal_and_wait_all(chans, nranks)


@cuda.jit(cache=True, **SIMPLE_LIMITS)
def all_reduce_push_zero_copy_simple(chans, call_check, fingerprint, windows, outs, inp, out, nbytes, rank, nranks,
                                     kind, op):
    """``all_reduce_push`` (simple protocol)."""
    all_reduce_push(chans, call_check, fingerprint, windows, outs, inp, out, nbytes, rank, nranks, kind, op)
