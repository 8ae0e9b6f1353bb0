"""Composable device primitives every channel and algorithm reuses: byte copy and LL packets.

Buffers are 1-D uint8 arrays addressed by byte offsets; work is spread over ``nthreads``
cooperating threads, ``tid`` being the caller's index among them.

LL16 packet: four u32 ``{data0, flag, data1, flag}`` written by one 16-byte store (8 data bytes).
LL8 packet: two u32 ``{data, flag}`` written by one 8-byte store (4 data bytes). A reader spins
until the flag words equal the expected flag, so data and "ready" arrive together.

Waits take one error context ``ctx``: any plain-data tuple with ``err``, ``abort``, ``rank``, ``peer``,
``channel`` and ``timeout_ns`` (every channel handle has them; ``runtime.device_errors.WaitContext`` too).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .ptx import (address_of, load_u32, load_u32_again, load_v2, load_v2_volatile, load_v4, load_v4_volatile, store_u16,
                  store_u32, store_v2, store_v2_volatile, store_v4, store_v4_volatile)
from .spin import report_quiet, spin_until

LL16_BYTES = 16  # bytes of one LL16 packet
LL16_DATA = 8    # data bytes it carries
LL8_BYTES = 8
LL8_DATA = 4

VECTOR_PASS_BYTES = 128  # bytes a thread of ``copy_vectors`` moves per pass: eight 16-byte vectors in flight
# the fewest bytes copied by shifted word loads when source and destination do not line up: fewer go a byte per
# thread and pass, each pass a memory round trip; at 4096 a block's 1.6 KB share of an uneven all-to-all's range
# took four, 256 KB all-to-alls with counts 1.4-1.6x the even one's (H100, 4 and 8 ranks)
SHIFTED_MIN = 64
_U15 = np.uint64(15)
_U7 = np.uint64(7)
_U3 = np.uint64(3)
_ZERO = np.uint64(0)



@cuda.jit(device=True)
def next_flag(last):
    """The packet flag after ``last``: never 0 (fresh memory), and its parity alternates even across the 32-bit
    wrap, so packet areas double-buffered by parity are never reused by two uses in a row."""
    f = np.int64(last) + 1
    if f > 0xFFFFFFFF:
        f = 2
    return f

@cuda.jit(device=True)
def copy_bytes(dst, dst_off, src, src_off, nbytes, tid, nthreads):
    """Copy ``nbytes`` from ``src[src_off:]`` to ``dst[dst_off:]``: single bytes up to the first 16-byte-aligned
    destination byte, then 16-byte stores (of 16-byte loads when the source lines up too, else, from
    ``SHIFTED_MIN`` bytes, of 4-byte loads merged by shifts: uneven offsets copy at vector speed), single bytes
    after. The shifted loads read each source word once per vector that needs it: the word two vectors share
    twice (an L1 hit on a GPU, which the simulator's traffic count leaves out). A thread loads its first
    head and tail bytes before its vectors, so the three parts cost one memory round trip, not three."""
    head = min(np.int64((np.uint64(16) - (address_of(dst, dst_off) & _U15)) & _U15), nbytes)
    shift = address_of(src, src_off + head) & _U15
    if shift != _ZERO and nbytes < SHIFTED_MIN:
        head = nbytes
    elif shift != _ZERO:  # the shifted loop reads up to 3 bytes before and after its vectors: one more each end
        head = min(head + 16, nbytes)
    d0, s0 = dst_off + head, src_off + head
    nvec = (nbytes - head) // 16 if shift == _ZERO else max((nbytes - head) // 16 - 1, 0)
    tail = head + nvec * 16
    first_head = src[src_off + tid] if tid < head else np.uint8(0)
    first_tail = src[src_off + tail + tid] if tail + tid < nbytes else np.uint8(0)
    if shift == _ZERO:
        copy_vectors(dst, d0, src, s0, nvec, tid, nthreads)
    else:
        copy_shifted(dst, d0, src, s0, nvec, tid, nthreads)
    if tid < head:
        dst[dst_off + tid] = first_head
    if tail + tid < nbytes:
        dst[dst_off + tail + tid] = first_tail
    i = tid + nthreads
    while i < head:
        dst[dst_off + i] = src[src_off + i]
        i += nthreads
    i = tail + tid + nthreads
    while i < nbytes:
        dst[dst_off + i] = src[src_off + i]
        i += nthreads


@cuda.jit(device=True)
def copy_vectors(dst, dst_off, src, src_off, nvec, tid, nthreads):
    """``nvec`` 16-byte vectors, both ends 16-byte aligned; eight loads in flight per thread (a grid of one
    512-thread block per SM needs that many to keep memory busy), then four, then one at a time (a thread with
    four to seven vectors in all still has four in flight)."""
    i = tid
    step = nthreads * 16
    while i + 7 * nthreads < nvec:
        s0, d0 = src_off + i * 16, dst_off + i * 16
        first = _load_four(src, s0, step)
        second = _load_four(src, s0 + 4 * step, step)  # all eight loads issued before the first store
        _store_four(dst, d0, step, first)
        _store_four(dst, d0 + 4 * step, step, second)
        i += 8 * nthreads
    if i + 3 * nthreads < nvec:  # four passes left, or five to seven: four of them together
        _store_four(dst, dst_off + i * 16, step, _load_four(src, src_off + i * 16, step))
        i += 4 * nthreads
    while i < nvec:
        a, b, c, d = load_v4(src, src_off + i * 16)
        store_v4(dst, dst_off + i * 16, a, b, c, d)
        i += nthreads


@cuda.jit(device=True)
def _load_four(src, at, step):
    """The 16-byte vectors at ``src[at]``, ``src[at + step]``, ... (four), as four 4-tuples of words."""
    return (load_v4(src, at), load_v4(src, at + step), load_v4(src, at + 2 * step), load_v4(src, at + 3 * step))


@cuda.jit(device=True)
def _store_four(dst, at, step, vectors):
    """``_load_four``'s vectors stored at ``dst[at]``, ``dst[at + step]``, ..."""
    for k in range(4):
        a, b, c, d = vectors[k]
        store_v4(dst, at + k * step, a, b, c, d)


@cuda.jit(device=True)
def copy_shifted(dst, dst_off, src, src_off, nvec, tid, nthreads):
    """``nvec`` 16-byte vectors to an aligned ``dst`` from a ``src`` that is not: five aligned 4-byte loads
    (the 4-byte word holding the first byte, and the four after it) shifted into each vector; four vectors (20
    loads, half the bytes ``copy_vectors`` keeps) in flight per thread."""
    r = address_of(src, src_off) & _U3
    bits = r * np.uint64(8)
    base = src_off - np.int64(r)
    i = tid
    step = nthreads * 16
    while i + 3 * nthreads < nvec:
        at, d0 = base + i * 16, dst_off + i * 16
        a0, a1, a2, a3, a4 = load_words5(src, at)
        b0, b1, b2, b3, b4 = load_words5(src, at + step)
        c0, c1, c2, c3, c4 = load_words5(src, at + 2 * step)
        e0, e1, e2, e3, e4 = load_words5(src, at + 3 * step)
        store_shifted(dst, d0, a0, a1, a2, a3, a4, bits)
        store_shifted(dst, d0 + step, b0, b1, b2, b3, b4, bits)
        store_shifted(dst, d0 + 2 * step, c0, c1, c2, c3, c4, bits)
        store_shifted(dst, d0 + 3 * step, e0, e1, e2, e3, e4, bits)
        i += 4 * nthreads
    while i < nvec:
        a0, a1, a2, a3, a4 = load_words5(src, base + i * 16)
        store_shifted(dst, dst_off + i * 16, a0, a1, a2, a3, a4, bits)
        i += nthreads


@cuda.jit(device=True)
def store_shifted(dst, off, w0, w1, w2, w3, w4, bits):
    """The 16 bytes from bit ``bits`` of the five words ``w4:...:w0``, stored at aligned ``dst[off:]``."""
    store_v4(dst, off, funnel(w0, w1, bits), funnel(w1, w2, bits), funnel(w2, w3, bits), funnel(w3, w4, bits))


@cuda.jit(device=True)
def load_words5(src, at):
    """Five aligned 4-byte words from byte ``at`` of ``src``, widened to 64 bits for ``funnel``; the fifth is the
    next vector's first (``load_u32_again``: a range's vectors count their bytes once)."""
    return (np.uint64(load_u32(src, at)), np.uint64(load_u32(src, at + 4)), np.uint64(load_u32(src, at + 8)),
            np.uint64(load_u32(src, at + 12)), np.uint64(load_u32_again(src, at + 16)))


@cuda.jit(device=True)
def funnel(lo, hi, bits):
    """The 32 bits from bit ``bits`` of the 64-bit word ``hi:lo``."""
    return np.uint32((lo | (hi << np.uint64(32))) >> bits & np.uint64(0xFFFFFFFF))


@cuda.jit(device=True)
def gather_word(src, off, nvalid):
    """Little-endian u32 from ``nvalid`` (1..4) bytes at ``src[off:]``, zero-padded."""
    w = np.uint32(0)
    for k in range(4):
        if k < nvalid:
            w = np.uint32(w | (np.uint32(src[off + k]) << np.uint32(8 * k)))  # a u32, not numba's widened u64
    return w


@cuda.jit(device=True)
def scatter_word(dst, off, w, nvalid):
    """Write the low ``nvalid`` bytes of u32 ``w`` to ``dst[off:]``."""
    for k in range(4):
        if k < nvalid:
            dst[off + k] = np.uint8((w >> np.uint32(8 * k)) & np.uint32(0xFF))


@cuda.jit(device=True)
def data_word(src, off, remaining):
    """The u32 of data at ``src[off:]`` with ``remaining`` bytes left (aligned fast path)."""
    if remaining >= 4 and address_of(src, off) & _U3 == _ZERO:
        return load_u32(src, off)
    if remaining <= 0:
        return np.uint32(0)
    return gather_word(src, off, min(remaining, 4))


@cuda.jit(device=True)
def put_word(dst, off, w, remaining):
    if remaining >= 4 and address_of(dst, off) & _U3 == _ZERO:
        store_u32(dst, off, w)
    elif remaining > 0:
        scatter_word(dst, off, w, min(remaining, 4))


@cuda.jit(device=True)
def data_pair(src, off, remaining):
    """The two u32 of data at ``src[off:]`` with ``remaining`` bytes left: one 8-byte load when aligned, else two
    4-byte loads, else (a 2-byte or odd offset: an uneven all-to-all's ranges) three aligned words shifted together
    where they lie in ``src``, not eight byte loads."""
    at = address_of(src, off)
    if remaining >= 8 and at & _U7 == _ZERO:
        return load_v2(src, off)
    r = np.int64(at & _U3)
    base = off - r
    if remaining >= 8 and r != 0 and base >= 0 and base + 12 <= src.shape[0]:
        bits = np.uint64(r * 8)
        w0 = np.uint64(load_u32(src, base))
        w1 = np.uint64(load_u32(src, base + 4))
        w2 = np.uint64(load_u32(src, base + 8))
        return funnel(w0, w1, bits), funnel(w1, w2, bits)
    return data_word(src, off, remaining), data_word(src, off + 4, remaining - 4)


@cuda.jit(device=True)
def put_pair(dst, off, a, c, remaining):
    """Write the low ``remaining`` (up to 8) bytes of u32 ``c:a`` to ``dst[off:]``: one 8-byte store when aligned,
    a 2-, a 4- and a 2-byte store at a 2-byte offset (16-bit data at an uneven element offset), else by words."""
    at = address_of(dst, off)
    if remaining >= 8 and at & _U7 == _ZERO:
        store_v2(dst, off, a, c)
    elif remaining >= 8 and at & _U3 == np.uint64(2):
        store_u16(dst, off, a)
        store_u32(dst, off + 2, np.uint32((a >> np.uint32(16)) | (c << np.uint32(16))))
        store_u16(dst, off + 6, c >> np.uint32(16))
    else:
        put_word(dst, off, a, remaining)
        put_word(dst, off + 4, c, remaining - 4)


@cuda.jit(device=True)
def put_packets_ll16(pkt, pkt_off, src, src_off, nbytes, tid, nthreads, flag):
    """Pack ``nbytes`` of ``src`` into LL16 packets at ``pkt[pkt_off:]`` (2 bytes of packet per data byte)."""
    npkt = (nbytes + LL16_DATA - 1) // LL16_DATA
    i = tid
    while i < npkt:
        a, c = data_pair(src, src_off + i * LL16_DATA, nbytes - i * LL16_DATA)
        store_packet_ll16(pkt, pkt_off + i * LL16_BYTES, a, c, flag)
        i += nthreads


@cuda.jit(device=True)
def store_packet_ll16(pkt, byte_off, a, c, flag):
    """The LL16 packet of data words ``a``, ``c`` and ``flag`` at ``pkt[byte_off:]``, in one 16-byte store."""
    f = np.uint32(flag)
    store_v4_volatile(pkt, byte_off, a, f, c, f)


@cuda.jit(device=True)
def read_packet_ll16(pkt, byte_off, flag, ctx, op):
    """Spin until the LL16 packet at ``byte_off`` carries ``flag``; its two data words, and False (error
    recorded in ``ctx`` for ``op``) past the budget or once the host set its abort word."""
    return read_packet_ll16_from(pkt, byte_off, flag, ctx, ctx.peer, op)


@cuda.jit(device=True)
def read_packet_ll16_from(pkt, byte_off, flag, ctx, peer, op):
    """``read_packet_ll16`` naming ``peer`` as the sender in a recorded error (one context serves many peers)."""
    ok, data = spin_until(_ll16_arrived, pkt, byte_off, flag, ctx, peer, ctx.channel, op, op)
    return data[0], data[1], ok


@cuda.jit(device=True)
def report_packet_ll16(pkt, byte_off, flag, ctx, peer, op):
    """``spin.report_quiet`` for a quiet wait for the LL16 packet at ``byte_off`` (``op``: its code without
    ``QUIET``), with the flag the packet holds now."""
    _, seen, _ = _ll16_arrived(pkt, byte_off, flag)
    report_quiet(ctx, op, peer, ctx.channel, flag, seen)


@cuda.jit(device=True)
def read_three_packets_ll16_from(pkt, byte_off, flag, ctx, peer, op):
    """``read_packet_ll16_from`` of the three LL16 packets at ``byte_off``, waited for together (one memory round
    trip a probe, not one per packet): (data words of the first, second and third, arrived)."""
    ok, d = spin_until(_three_ll16_arrived, pkt, byte_off, flag, ctx, peer, ctx.channel, op, op)
    return d[0], d[1], d[2], d[3], d[4], d[5], ok


@cuda.jit(device=True)
def _three_ll16_arrived(pkt, byte_off, flag):
    """Probe (``spin.spin_until``): all six flag words of the three LL16 packets at ``byte_off`` are ``flag``."""
    f = np.uint32(flag)
    a, fa, c, fc = load_v4_volatile(pkt, byte_off)
    a2, fa2, c2, fc2 = load_v4_volatile(pkt, byte_off + LL16_BYTES)
    a3, fa3, c3, fc3 = load_v4_volatile(pkt, byte_off + 2 * LL16_BYTES)
    done = fa == f and fc == f and fa2 == f and fc2 == f and fa3 == f and fc3 == f
    return done, fa, (a, c, a2, c2, a3, c3)


@cuda.jit(device=True)
def _ll16_arrived(pkt, byte_off, flag):
    """Probe (``spin.spin_until``): both flag words of the LL16 packet at ``byte_off`` are ``flag``; its data."""
    f = np.uint32(flag)
    a, fa, c, fc = load_v4_volatile(pkt, byte_off)
    return fa == f and fc == f, fa, (a, c)


@cuda.jit(device=True)
def unpack_packets_ll16(dst, dst_off, pkt, pkt_off, nbytes, tid, nthreads, flag, ctx, op):
    """Wait for the LL16 packets at ``pkt[pkt_off:]`` and write their ``nbytes`` of data to ``dst[dst_off:]``."""
    i = tid
    while i * LL16_DATA < nbytes:
        if not unpack_packet_ll16(dst, dst_off, pkt, pkt_off, i, nbytes, flag, ctx, op)[2]:
            return False
        i += nthreads
    return True


@cuda.jit(device=True)
def unpack_packet_ll16(dst, dst_off, pkt, pkt_off, i, nbytes, flag, ctx, op):
    """Packet ``i`` of ``unpack_packets_ll16``, waited for and written: its two data words and whether it came."""
    a, c, got = read_packet_ll16(pkt, pkt_off + i * LL16_BYTES, flag, ctx, op)
    if got:
        put_pair(dst, dst_off + i * LL16_DATA, a, c, nbytes - i * LL16_DATA)
    return a, c, got


@cuda.jit(device=True)
def unpack_forward_packets_ll16(dst, dst_off, pkt, pkt_off, nbytes, tid, nthreads, flag, ctx, op, peers, skip,
                                fwd_off):
    """``unpack_packets_ll16``, each packet also stored as it came (``flag``) at ``fwd_off`` of every channel of
    ``peers`` but ``peers[skip]`` (receive, copy, send: from registers, nothing read again)."""
    i = tid
    while i * LL16_DATA < nbytes:
        a, c, got = unpack_packet_ll16(dst, dst_off, pkt, pkt_off, i, nbytes, flag, ctx, op)
        if not got:
            return False
        for j in range(len(peers)):
            if j != skip:
                store_packet_ll16(peers[j].dst, fwd_off + i * LL16_BYTES, a, c, flag)
        i += nthreads
    return True


@cuda.jit(device=True)
def put_packets_ll8(pkt, pkt_off, src, src_off, nbytes, tid, nthreads, flag):
    """Pack ``nbytes`` of ``src`` into LL8 packets at ``pkt[pkt_off:]`` (one 8-byte store each)."""
    npkt = (nbytes + LL8_DATA - 1) // LL8_DATA
    f = np.uint32(flag)
    i = tid
    while i < npkt:
        a = data_word(src, src_off + i * LL8_DATA, nbytes - i * LL8_DATA)
        store_v2_volatile(pkt, pkt_off + i * LL8_BYTES, a, f)
        i += nthreads


@cuda.jit(device=True)
def read_packet_ll8(pkt, byte_off, flag, ctx, op):
    """Spin until the LL8 packet at ``byte_off`` carries ``flag``; its data word, and False as read_packet_ll16."""
    ok, a = spin_until(_ll8_arrived, pkt, byte_off, flag, ctx, ctx.peer, ctx.channel, op, op)
    return a, ok


@cuda.jit(device=True)
def _ll8_arrived(pkt, byte_off, flag):
    """Probe: the flag word of the LL8 packet at ``byte_off`` is ``flag``; its data word."""
    a, fa = load_v2_volatile(pkt, byte_off)
    return fa == np.uint32(flag), fa, a


@cuda.jit(device=True)
def unpack_packets_ll8(dst, dst_off, pkt, pkt_off, nbytes, tid, nthreads, flag, ctx, op):
    """Wait for the LL8 packets at ``pkt[pkt_off:]`` and write their ``nbytes`` of data to ``dst[dst_off:]``."""
    npkt = (nbytes + LL8_DATA - 1) // LL8_DATA
    i = tid
    while i < npkt:
        a, got = read_packet_ll8(pkt, pkt_off + i * LL8_BYTES, flag, ctx, op)
        if not got:
            return False
        put_word(dst, dst_off + i * LL8_DATA, a, nbytes - i * LL8_DATA)
        i += nthreads
    return True
