"""LL16 packets carry exactly the bytes asked for whatever the alignment of source and destination (8-byte loads
and stores, 4-byte words, shifted aligned words, mixed-width stores, single bytes), and write nothing around
them; the shifted loads never read outside the source array."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import cuda

from pymscclpp.channels.primitives import LL16_BYTES, LL16_DATA, put_packets_ll16, unpack_packets_ll16
from pymscclpp.runtime.device_errors import ERR_WORDS, WaitContext

FLAG = 7


@cuda.jit
def _pack(pkt, src, src_off, nbytes):
    put_packets_ll16(pkt, 0, src, src_off, nbytes, cuda.threadIdx.x, cuda.blockDim.x, FLAG)


@cuda.jit
def _unpack(dst, dst_off, pkt, nbytes, ctx, ok):
    if not unpack_packets_ll16(dst, dst_off, pkt, 0, nbytes, cuda.threadIdx.x, cuda.blockDim.x, FLAG, ctx, 1):
        ok[0] = 0


def _through_packets(nbytes: int, src_off: int, src_after: int, dst_off: int, nthreads: int, seed: int):
    """(destination after the trip, destination expected): ``src_after`` bytes follow the range in its array."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, 256, src_off + nbytes + src_after, dtype=np.uint8)
    before = rng.integers(0, 256, dst_off + nbytes + 19, dtype=np.uint8)
    pkt = cuda.to_device(np.zeros(max(1, (nbytes + LL16_DATA - 1) // LL16_DATA) * LL16_BYTES, np.uint8))
    ctx = WaitContext(cuda.to_device(np.zeros(ERR_WORDS, np.int64)), cuda.to_device(np.zeros(1, np.uint64)),
                      np.int64(0), np.int64(0), np.int64(0), np.uint64(2_000_000_000))
    ok = cuda.to_device(np.ones(1, np.int64))
    dst = cuda.to_device(before)
    _pack[1, nthreads](pkt, cuda.to_device(src), src_off, nbytes)
    _unpack[1, nthreads](dst, dst_off, pkt, nbytes, ctx, ok)
    assert ok.copy_to_host()[0] == 1, "a packet never arrived"
    want = before.copy()
    want[dst_off:dst_off + nbytes] = src[src_off:src_off + nbytes]
    return dst.copy_to_host(), want


@settings(max_examples=40, deadline=None)
@given(nbytes=st.integers(0, 300), src_off=st.integers(0, 20), src_after=st.integers(0, 5),
       dst_off=st.integers(0, 20), nthreads=st.sampled_from([1, 5, 32]), seed=st.integers(0, 2**16))
def test_packets_carry_exactly_the_range_at_any_alignment(nbytes, src_off, src_after, dst_off, nthreads, seed):
    got, want = _through_packets(nbytes, src_off, src_after, dst_off, nthreads, seed)
    np.testing.assert_array_equal(got, want)


def test_packets_with_every_pair_of_source_and_destination_offsets_modulo_eight():
    for src_off in range(8):
        for dst_off in range(8):  # the range ends its source array: no shifted load may read past it
            got, want = _through_packets(8 * 9 + 5, src_off, 0, dst_off, 4, 8 * src_off + dst_off)
            np.testing.assert_array_equal(got, want, err_msg=f"source offset {src_off}, destination {dst_off}")
