"""Reduction primitives: ``dst = a (op) b`` over bytes holding elements of one dtype, 16 bytes per step.

Data stays in u32 words: each word holds one f32/i32, two f16/bf16 or four u8 elements, combined
lane by lane in float32 (f16, bf16: rounded back to nearest even; sums by one packed instruction, ``packed``) or
integer arithmetic. Buffers are
uint8 arrays addressed by byte offsets, like ``primitives.copy_bytes``; reused by every algorithm.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .packed import add_bf16x2, add_f16x2, has_bf16x2
from .primitives import (LL16_BYTES, LL16_DATA, data_word, gather_word, put_pair, scatter_word,
                         read_packet_ll16_from, store_packet_ll16)
from .ptx import (address_of, f16_to_f32, f32_as_u32, f32_to_f16, load_u32, load_v4, store_u32,
                  store_v4, u32_as_f32)

DTYPE_KINDS = {"float32": 0, "bfloat16": 1, "float16": 2, "int32": 3, "uint8": 4}
OPS = {"sum": 0, "min": 1, "max": 2, "prod": 3, "avg": 4}  # avg: summed, then divided by the sources in the kernel
PAIRWISE_OPS = frozenset(OPS) - {"avg"}  # what a reduction of two sources at a time (reduce_bytes, plans) serves
F32, BF16, F16, I32, U8 = 0, 1, 2, 3, 4
SUM, MIN, MAX, PROD, AVG = 0, 1, 2, 3, 4

_U15 = np.uint64(15)
_U3 = np.uint64(3)
_ZERO64 = np.uint64(0)
_LO16 = np.uint32(0xFFFF)
_HI16 = np.uint32(0xFFFF0000)


def dtype_kind(dtype) -> int:
    """The kind code of a NumPy dtype or dtype name (``bfloat16`` by name or ml_dtypes dtype)."""
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    if name not in DTYPE_KINDS:
        raise ValueError(f"cannot reduce dtype {name}: supported are {', '.join(DTYPE_KINDS)}")
    return DTYPE_KINDS[name]


def op_code(op: str) -> int:
    """The code of a reduction op name."""
    if op not in OPS:
        raise ValueError(f"unknown reduction op {op!r}: supported are {', '.join(OPS)}")
    return OPS[op]


@cuda.jit(device=True)
def _apply(x, y, op):
    """``x (op) y`` in the arithmetic of the operands' type (avg sums; ``finish_word`` divides)."""
    if op == SUM or op == AVG:
        return x + y
    if op == MIN:
        return min(x, y)
    if op == MAX:
        return max(x, y)
    return x * y


@cuda.jit(device=True)
def _bf16_bits(x):
    """Round float32 ``x`` to bfloat16 (nearest even, NaN kept quiet); the 16 bits in a u32."""
    u = f32_as_u32(x)
    if (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000):
        return (u >> np.uint32(16)) | np.uint32(0x40)
    u = u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))
    return u >> np.uint32(16)


@cuda.jit(device=True)
def combine_word(a, b, kind, op):
    """Combine two u32 words lane by lane for elements of ``kind``; a u32 (numba widens integer arithmetic to 64
    bits, so every path says so: callers then pass u32 words alone, and this compiles once per kernel)."""
    if kind == F32:
        return f32_as_u32(_apply(u32_as_f32(a), u32_as_f32(b), op))
    summed = op == SUM or op == AVG
    if kind == BF16:
        if summed and has_bf16x2():
            return add_bf16x2(a, b)
        lo = _apply(u32_as_f32(a << np.uint32(16)), u32_as_f32(b << np.uint32(16)), op)
        hi = _apply(u32_as_f32(a & _HI16), u32_as_f32(b & _HI16), op)
        return np.uint32(_bf16_bits(lo) | (_bf16_bits(hi) << np.uint32(16)))
    if kind == F16:
        if summed:
            return add_f16x2(a, b)
        lo = _apply(f16_to_f32(a & _LO16), f16_to_f32(b & _LO16), op)
        hi = _apply(f16_to_f32(a >> np.uint32(16)), f16_to_f32(b >> np.uint32(16)), op)
        return np.uint32(f32_to_f16(lo) | (f32_to_f16(hi) << np.uint32(16)))
    if kind == I32:
        return np.uint32(_apply(np.int32(a), np.int32(b), op))
    out = np.uint32(0)
    for lane in range(4):
        sh = np.uint32(8 * lane)
        x = np.uint32((a >> sh) & np.uint32(0xFF))
        y = np.uint32((b >> sh) & np.uint32(0xFF))
        out = np.uint32(out | ((np.uint32(_apply(x, y, op)) & np.uint32(0xFF)) << sh))
    return out


@cuda.jit(device=True)
def _quotient(x, n):
    """``x / n`` rounded toward zero (an integer average, as C divides)."""
    q = abs(x) // n
    return -q if x < 0 else q


@cuda.jit(device=True)
def finish_word(w, kind, op, n):
    """The final value of a word reduced over ``n`` sources: for avg its lanes divided by ``n`` (floats divided,
    rounded as a division of the sum; integers rounded toward zero), else ``w`` as it is."""
    if op != AVG:
        return w
    if kind == F32:
        return f32_as_u32(u32_as_f32(w) / np.float32(n))
    if kind == BF16:
        lo = u32_as_f32(w << np.uint32(16)) / np.float32(n)
        hi = u32_as_f32(w & _HI16) / np.float32(n)
        return np.uint32(_bf16_bits(lo) | (_bf16_bits(hi) << np.uint32(16)))
    if kind == F16:
        lo = f16_to_f32(w & _LO16) / np.float32(n)
        hi = f16_to_f32(w >> np.uint32(16)) / np.float32(n)
        return np.uint32(f32_to_f16(lo) | (f32_to_f16(hi) << np.uint32(16)))
    if kind == I32:
        return np.uint32(np.int32(_quotient(np.int64(np.int32(w)), np.int64(n))))
    out = np.uint32(0)
    for lane in range(4):
        sh = np.uint32(8 * lane)
        x = np.uint32((w >> sh) & np.uint32(0xFF)) // np.uint32(n)
        out = np.uint32(out | ((x & np.uint32(0xFF)) << sh))
    return out


@cuda.jit(device=True)
def itemsize_of(kind):
    """Bytes per element of ``kind``."""
    if kind == F32 or kind == I32:
        return 4
    if kind == U8:
        return 1
    return 2


@cuda.jit(device=True)
def reduce_bytes(dst, dst_off, a, a_off, b, b_off, nbytes, tid, nthreads, kind, op):
    """``dst[dst_off:] = a[a_off:] (op) b[b_off:]`` over ``nbytes`` (a whole number of elements; avg: the sum, as
    a pairwise step has no count of sources to divide by)."""
    done = 0
    al = address_of(dst, dst_off) | address_of(a, a_off) | address_of(b, b_off)
    if al & _U15 == _ZERO64:
        nvec = nbytes // 16
        i = tid
        while i < nvec:
            o = i * 16
            x0, x1, x2, x3 = load_v4(a, a_off + o)
            y0, y1, y2, y3 = load_v4(b, b_off + o)
            store_v4(dst, dst_off + o, combine_word(x0, y0, kind, op), combine_word(x1, y1, kind, op),
                     combine_word(x2, y2, kind, op), combine_word(x3, y3, kind, op))
            i += nthreads
        done = nvec * 16
    elif al & _U3 == _ZERO64:
        nword = nbytes // 4
        i = tid
        while i < nword:
            o = i * 4
            store_u32(dst, dst_off + o, combine_word(load_u32(a, a_off + o), load_u32(b, b_off + o), kind, op))
            i += nthreads
        done = nword * 4
    # tail (and unaligned buffers): one element per step, through a zero-padded word
    size = itemsize_of(kind)
    i = done // size + tid
    nelem = nbytes // size
    while i < nelem:
        o = i * size
        w = combine_word(gather_word(a, a_off + o, size), gather_word(b, b_off + o, size), kind, op)
        scatter_word(dst, dst_off + o, w, size)
        i += nthreads


@cuda.jit(device=True)
def reduce_packet_ll16(i, local, local_off, local_slot, pkt, pkt_off, slot_stride, nslots, nbytes, flag, kind, op, ctx,
                       op_code):
    """The two result words of LL16 packet ``i`` of ``reduce_packets_ll16``, held (nothing written), and -1; on
    timeout the slot whose packet did not come (an error recorded unless ``op_code`` is quiet)."""
    off = i * LL16_DATA
    rem = nbytes - off
    a0 = np.uint32(0)
    a1 = np.uint32(0)
    for s in range(nslots):
        if s == local_slot:
            x0 = data_word(local, local_off + off, rem)  # not data_pair: 6 registers more in reduce_ll (63 to 69)
            x1 = data_word(local, local_off + off + 4, rem - 4)
        else:
            x0, x1, ok = read_packet_ll16_from(pkt, pkt_off + s * slot_stride + i * LL16_BYTES, flag, ctx, s, op_code)
            if not ok:
                return a0, a1, s
        if s == 0:
            a0 = x0
            a1 = x1
        else:
            a0 = combine_word(a0, x0, kind, op)
            a1 = combine_word(a1, x1, kind, op)
    return finish_word(a0, kind, op, nslots), finish_word(a1, kind, op, nslots), -1


@cuda.jit(device=True)
def put_packet_result(dst, dst_off, i, a0, a1, nbytes):
    """Write ``reduce_packet_ll16``'s two words of packet ``i`` to ``dst[dst_off:]``."""
    off = i * LL16_DATA
    put_pair(dst, dst_off + off, a0, a1, nbytes - off)


@cuda.jit(device=True)
def reduce_packets_ll16(dst, dst_off, local, local_off, local_slot, pkt, pkt_off, slot_stride, nslots, nbytes,
                        tid, nthreads, flag, kind, op, ctx, op_code, peers, fwd_off):
    """Reduce ``nslots`` sources in slot order into ``dst``: slot ``local_slot`` from ``local``, every other
    slot s from the LL16 packets at ``pkt[pkt_off + s * slot_stride:]`` (waited for; an error is recorded in
    ``ctx`` naming rank s), packets ``tid``, ``tid + nthreads``, ...; each result also goes as an LL16 packet of
    ``flag`` to ``fwd_off`` of every channel of ``peers`` (receive, reduce, send: from registers, nothing read
    again). False on timeout."""
    npkt = (nbytes + LL16_DATA - 1) // LL16_DATA
    i = tid
    while i < npkt:
        a0, a1, failed = reduce_packet_ll16(i, local, local_off, local_slot, pkt, pkt_off, slot_stride, nslots,
                                            nbytes, flag, kind, op, ctx, op_code)
        if failed >= 0:
            return False
        put_packet_result(dst, dst_off, i, a0, a1, nbytes)
        for j in range(len(peers)):
            store_packet_ll16(peers[j].dst, fwd_off + i * LL16_BYTES, a0, a1, flag)
        i += nthreads
    return True


@cuda.jit(device=True)
def _load4(arr, off, step):
    """Four 16-byte vectors ``step`` bytes apart from ``arr[off:]``: four loads in flight at once."""
    return load_v4(arr, off), load_v4(arr, off + step), load_v4(arr, off + 2 * step), load_v4(arr, off + 3 * step)


@cuda.jit(device=True)
def _combine_vec(a, x, kind, op):
    return (combine_word(a[0], x[0], kind, op), combine_word(a[1], x[1], kind, op),
            combine_word(a[2], x[2], kind, op), combine_word(a[3], x[3], kind, op))


@cuda.jit(device=True)
def _combine4(a, x, kind, op):
    return (_combine_vec(a[0], x[0], kind, op), _combine_vec(a[1], x[1], kind, op),
            _combine_vec(a[2], x[2], kind, op), _combine_vec(a[3], x[3], kind, op))


@cuda.jit(device=True)
def _finish_vec(a, kind, op, n):
    return (finish_word(a[0], kind, op, n), finish_word(a[1], kind, op, n), finish_word(a[2], kind, op, n),
            finish_word(a[3], kind, op, n))


@cuda.jit(device=True)
def _finish4(a, kind, op, n):
    return (_finish_vec(a[0], kind, op, n), _finish_vec(a[1], kind, op, n), _finish_vec(a[2], kind, op, n),
            _finish_vec(a[3], kind, op, n))


@cuda.jit(device=True)
def _store4(arr, off, step, v):
    for k in range(4):
        store_v4(arr, off + k * step, v[k][0], v[k][1], v[k][2], v[k][3])


@cuda.jit(device=True)
def _source(s, own_slot, own, own_off, slots, slots_off, stride, chans, use_chans):
    """(array, byte offset) of source ``s``: ours, a peer's memory through ``chans``, or a slot of ``slots``."""
    if s == own_slot:
        return own, own_off
    if use_chans:
        return chans[s if s < own_slot else s - 1].dst, slots_off
    return slots, slots_off + s * stride


@cuda.jit(device=True)
def reduce_sources(dst, dst_off, copy, copy_off, own, own_off, own_slot, slots, slots_off, stride, chans, use_chans,
                   fan, fan_out, nslots, nbytes, tid, nthreads, kind, op):
    """``dst[dst_off:]`` (and, unless ``copy`` is ``dst``, ``copy[copy_off:]``; with ``fan_out``, every peer memory
    ``fan[j].dst[dst_off:]`` too) = ``nslots`` sources reduced in slot order, each element read once: slot
    ``own_slot`` from ``own[own_off:]``, the others (``_source``) from peers' memory or from slots of ``slots``. Each thread keeps four vectors of a source in flight (peer reads are
    latency-bound). One pass, so ``dst`` may alias a source at the same offsets (in place)."""
    two = address_of(copy, copy_off) != address_of(dst, dst_off)
    al = address_of(dst, dst_off) | address_of(copy, copy_off)
    if fan_out:
        for j in range(nslots - 1):
            al = al | address_of(fan[j].dst, dst_off)
    for s in range(nslots):
        arr, off = _source(s, own_slot, own, own_off, slots, slots_off, stride, chans, use_chans)
        al = al | address_of(arr, off)
    done = 0
    if al & _U15 == _ZERO64:
        nvec = nbytes // 16
        step = nthreads * 16
        i = tid
        while i + 3 * nthreads < nvec:
            o = i * 16
            arr, off = _source(0, own_slot, own, own_off, slots, slots_off, stride, chans, use_chans)
            acc = _load4(arr, off + o, step)
            for s in range(1, nslots):
                arr, off = _source(s, own_slot, own, own_off, slots, slots_off, stride, chans, use_chans)
                acc = _combine4(acc, _load4(arr, off + o, step), kind, op)
            if op == AVG:
                acc = _finish4(acc, kind, op, nslots)
            _store4(dst, dst_off + o, step, acc)
            if two:
                _store4(copy, copy_off + o, step, acc)
            if fan_out:
                for j in range(nslots - 1):
                    _store4(fan[j].dst, dst_off + o, step, acc)
            i += 4 * nthreads
        while i < nvec:
            o = i * 16
            arr, off = _source(0, own_slot, own, own_off, slots, slots_off, stride, chans, use_chans)
            a = load_v4(arr, off + o)
            for s in range(1, nslots):
                arr, off = _source(s, own_slot, own, own_off, slots, slots_off, stride, chans, use_chans)
                a = _combine_vec(a, load_v4(arr, off + o), kind, op)
            a = _finish_vec(a, kind, op, nslots)
            store_v4(dst, dst_off + o, a[0], a[1], a[2], a[3])
            if two:
                store_v4(copy, copy_off + o, a[0], a[1], a[2], a[3])
            if fan_out:
                for j in range(nslots - 1):
                    store_v4(fan[j].dst, dst_off + o, a[0], a[1], a[2], a[3])
            i += nthreads
        done = nvec * 16
    size = itemsize_of(kind)
    i = done // size + tid
    nelem = nbytes // size
    while i < nelem:  # tail and unaligned buffers: one element per step, through a zero-padded word
        o = i * size
        arr, off = _source(0, own_slot, own, own_off, slots, slots_off, stride, chans, use_chans)
        w = gather_word(arr, off + o, size)
        for s in range(1, nslots):
            arr, off = _source(s, own_slot, own, own_off, slots, slots_off, stride, chans, use_chans)
            w = combine_word(w, gather_word(arr, off + o, size), kind, op)
        w = finish_word(w, kind, op, nslots)
        scatter_word(dst, dst_off + o, w, size)
        if two:
            scatter_word(copy, copy_off + o, w, size)
        if fan_out:
            for j in range(nslots - 1):
                scatter_word(fan[j].dst, dst_off + o, w, size)
        i += nthreads


@cuda.jit(device=True)
def reduce_slots(dst, dst_off, own, own_off, own_slot, slots, slots_off, stride, nslots, nbytes, tid, nthreads,
                 kind, op, chans):
    """``reduce_sources`` of slot ``own_slot`` from ``own[own_off:]`` and slot s from ``slots[slots_off + s *
    stride:]`` into ``dst`` (``chans``: any channel tuple, unused, for the shared body's types)."""
    reduce_sources(dst, dst_off, dst, dst_off, own, own_off, own_slot, slots, slots_off, stride, chans, False,
                   chans, False, nslots, nbytes, tid, nthreads, kind, op)


@cuda.jit(device=True)
def reduce_peers(dst, dst_off, copy, copy_off, own, own_off, rank, chans, peer_off, nranks, nbytes, tid, nthreads,
                 kind, op):
    """``reduce_sources`` of every rank's data in rank order into ``dst`` and ``copy``: ours from ``own[own_off:]``,
    rank r's from the peer memory ``chans[j].dst[peer_off:]`` of its channel (``chans[j]``: the j-th peer in rank
    order)."""
    reduce_sources(dst, dst_off, copy, copy_off, own, own_off, rank, own, peer_off, 0, chans, True, chans, False,
                   nranks, nbytes, tid, nthreads, kind, op)


@cuda.jit(device=True)
def reduce_peers_to_all(out, own, off, rank, ins, outs, nranks, nbytes, tid, nthreads, kind, op):
    """Every rank's ``off:`` bytes reduced in rank order, read once each (ours from ``own``, rank r's from its
    memory ``ins[j].dst``), written to our ``out`` and to every peer's memory ``outs[j].dst`` at ``off``."""
    reduce_sources(out, off, out, off, own, off, rank, own, off, 0, ins, True, outs, True, nranks, nbytes, tid,
                   nthreads, kind, op)
