"""RegisteredMemory on the simulator: what can be registered, what is refused, and how peers map it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import cuda
from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

from pymscclpp.errors import InvalidUsageError, RegistrationError
from pymscclpp.runtime.memory import RegisteredMemory, RemoteMemory, alloc, view_as

TOKEN = b"t" * 16


def register(buf, token=TOKEN):
    return RegisteredMemory(buf, job_token=token, rank=0)


def test_host_numpy_array_is_refused_as_host_memory():
    with pytest.raises(InvalidUsageError, match="host memory"):
        register(np.zeros(16, np.uint8))


def test_non_contiguous_view_is_refused():
    buf = alloc(64)
    strided = FakeCUDAArray(view_as(buf, np.float32)._ary[::2])
    with pytest.raises(InvalidUsageError, match="not contiguous"):
        register(strided)


def test_process_local_simulator_array_cannot_be_shared():
    with pytest.raises(RegistrationError, match="pymscclpp.alloc"):
        register(cuda.to_device(np.zeros(8, np.float32)))


def test_objects_that_are_not_arrays_are_refused():
    with pytest.raises(InvalidUsageError, match="expected a device array"):
        register([1, 2, 3])


def test_handle_of_another_job_is_refused():
    data = register(alloc(32)).serialize()
    with pytest.raises(RegistrationError, match="another job"):
        RemoteMemory(data, job_token=b"u" * 16)


def test_handle_of_another_host_is_refused(monkeypatch):
    monkeypatch.setenv("PYMSCCLPP_HOST_ID", "host-a")
    data = register(alloc(32)).serialize()
    monkeypatch.setenv("PYMSCCLPP_HOST_ID", "host-b")
    with pytest.raises(RegistrationError, match="another host"):
        RemoteMemory(data, job_token=TOKEN)


@pytest.mark.parametrize("mangle", [lambda d: d[:-1], lambda d: b"X" + d[1:], lambda d: d + b"\0"])
def test_truncated_or_foreign_handle_bytes_are_refused(mangle):
    data = register(alloc(32)).serialize()
    with pytest.raises(RegistrationError):
        RemoteMemory(mangle(data), job_token=TOKEN)


@settings(max_examples=25, deadline=None)
@given(total=st.integers(16, 4096), data=st.data())
def test_a_view_at_any_offset_maps_exactly_its_bytes(total, data):
    buf = alloc(total)
    start = data.draw(st.integers(0, total - 1))
    length = data.draw(st.integers(1, total - start))
    local = FakeCUDAArray(buf._ary[start:start + length])
    remote = RemoteMemory(register(local).serialize(), job_token=TOKEN)
    payload = np.random.default_rng(total).integers(0, 256, length, dtype=np.uint8)
    remote.array.copy_to_device(payload)
    np.testing.assert_array_equal(buf.copy_to_host()[start:start + length], payload)
    assert not buf.copy_to_host()[:start].any() and not buf.copy_to_host()[start + length:].any()
    remote.close()


def _create_attach_release(comm) -> tuple[bool, bool]:
    import os
    from pymscclpp.runtime import shm
    mine = shm.create(4096)
    theirs = shm.attach(mine.name, 4096)  # mapped as a peer maps it: not this mapping's to unlink
    shm.release_all()
    return os.path.exists(os.path.join("/dev/shm", mine.name)), shm.find(mine.base, 1) or shm.find(theirs.base, 1)


def test_release_all_unlinks_the_segments_this_process_created_and_forgets_the_mapped_ones():
    from pymscclpp.testing import run_ranks
    assert run_ranks(1, _create_attach_release) == [(False, None)]  # in a rank: it releases every segment there
