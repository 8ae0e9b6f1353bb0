"""``copy_bytes`` copies exactly the bytes asked for, whatever the offsets' alignment (vector, shifted and byte
paths), and nothing around them."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import cuda

from pymscclpp.channels.primitives import SHIFTED_MIN, copy_bytes


@cuda.jit
def _kernel(dst, dst_off, src, src_off, nbytes):
    copy_bytes(dst, dst_off, src, src_off, nbytes, cuda.threadIdx.x, cuda.blockDim.x)


def _copied(nbytes: int, dst_off: int, src_off: int, nthreads: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, 256, src_off + nbytes, dtype=np.uint8)  # the copy's source ends the buffer
    before = rng.integers(0, 256, dst_off + nbytes + 19, dtype=np.uint8)
    dst = cuda.to_device(before)
    _kernel[1, nthreads](dst, dst_off, cuda.to_device(src), src_off, nbytes)
    want = before.copy()
    want[dst_off:dst_off + nbytes] = src[src_off:]
    return dst.copy_to_host(), want


@settings(max_examples=40, deadline=None)
@given(nbytes=st.integers(0, 700) | st.integers(SHIFTED_MIN - 40, SHIFTED_MIN + 700), dst_off=st.integers(0, 40), src_off=st.integers(0, 40),
       nthreads=st.sampled_from([1, 5, 32]), seed=st.integers(0, 2**16))
def test_copy_bytes_copies_exactly_the_range_at_any_alignment(nbytes, dst_off, src_off, nthreads, seed):
    got, want = _copied(nbytes, dst_off, src_off, nthreads, seed)
    np.testing.assert_array_equal(got, want)


def test_copy_bytes_with_every_source_shift_against_an_aligned_destination():
    for src_off in range(16):  # shift 0 (vectors), 4, 8, 12 (whole words) and the byte shifts
        got, want = _copied(SHIFTED_MIN + 16 * 9 + 7, 0, src_off, 8, src_off)
        np.testing.assert_array_equal(got, want, err_msg=f"source offset {src_off}")


def test_copy_bytes_with_every_count_of_vectors_a_thread_takes_through_its_eight_four_and_one_wide_passes():
    threads = 4
    for per_thread in range(1, 21):  # 1-3: one at a time; 4-7: four together; 8 on: eight, then the rest
        for extra in (0, 16 * 3 + 5):  # whole passes of the block, or a few vectors and bytes more
            nbytes = 16 * threads * per_thread + extra
            got, want = _copied(nbytes, 0, 0, threads, per_thread)
            np.testing.assert_array_equal(got, want, err_msg=f"{per_thread} vectors a thread, {extra} bytes more")
