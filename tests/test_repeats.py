"""The Communicator's memory of recent calls (in process, no ranks): found only for the very buffers, unchanged;
a remembered call keeps no buffer alive unless its algorithm's launch reads the buffers."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from pymscclpp.algos import repeats
from pymscclpp.algos.algorithm import Algorithm, Call, CallBuffer
from pymscclpp.algos.repeats import MAX_CALLS, RepeatCache
from pymscclpp.runtime.buffers import DeviceView


class Collection:
    generation = 0


class ByAddress(Algorithm):
    launch_reads_buffers = False


class ByObject(Algorithm):
    pass


def view(ptr: int = 0x1000) -> DeviceView:
    return DeviceView(ptr, 256, np.dtype(np.float32))


def call_on(send, recv) -> Call:
    return Call(collective="all_reduce", sendbuf=send, recvbuf=recv, send=CallBuffer(0x1000), recv=CallBuffer(0x1000),
                peer_bytes=1024, message_bytes=1024, dtype="float32", op="sum", root=0, stream=0, in_place=True)


def test_a_call_is_found_for_the_same_buffer_objects_only():
    cache, x = RepeatCache(Collection()), view()
    cache.remember(("k",), x, None, (ByAddress(), None), call_on(x, x), "stream of x")
    hit = cache.find(("k",), x, None)
    assert hit is not None and hit.current_stream == "stream of x"
    assert cache.find(("k",), view(), None) is None  # an equal view, another object
    assert cache.find(("k",), x, x) is None


def test_a_remembered_call_keeps_no_buffer_alive_when_its_launch_reads_addresses_only():
    cache, x = RepeatCache(Collection()), view()
    cache.remember(("k",), x, None, (ByAddress(), None), call_on(x, x))
    assert cache.find(("k",), x, None).call.sendbuf is None
    gone = weakref.ref(x)
    del x
    gc.collect()
    assert gone() is None


def test_a_launch_that_reads_the_buffers_gets_them_and_keeps_them():
    cache, x = RepeatCache(Collection()), view()
    cache.remember(("k",), x, None, (ByObject(), None), call_on(x, x))
    assert cache.find(("k",), x, None).call.sendbuf is x


def test_calls_on_buffers_without_a_cheap_state_are_not_remembered():
    cache = RepeatCache(Collection())
    cache.remember(("k",), np.zeros(4), None, (ByAddress(), None), call_on(None, None))
    assert len(cache) == 0


def test_the_oldest_call_is_forgotten_first():
    cache, bufs = RepeatCache(Collection()), [view(0x1000 + i) for i in range(MAX_CALLS + 1)]
    for i, b in enumerate(bufs):
        cache.remember((i,), b, None, (ByAddress(), None), call_on(b, b))
    assert len(cache) == MAX_CALLS
    assert cache.find((0,), bufs[0], None) is None and cache.find((MAX_CALLS,), bufs[-1], None) is not None


KEY = ("all_reduce", 1, 2, "sum", None, 0)


def test_a_torch_tensor_changed_in_place_is_not_found_and_a_freed_one_is_not_kept():
    torch = pytest.importorskip("torch")
    cache, x = RepeatCache(Collection()), torch.ones(4, 6)
    assert repeats.state_of(x) is repeats.torch_state
    cache.remember(KEY, x, None, (ByAddress(), None), call_on(x, x))
    assert cache.find(KEY, x, None) is not None
    x.t_()
    assert cache.find(KEY, x, None) is None
    x.t_()
    assert cache.find(KEY, x, None) is not None
    x.resize_(5)
    assert cache.find(KEY, x, None) is None
    gone = weakref.ref(x)
    del x
    gc.collect()
    assert gone() is None


def test_a_new_tensor_at_the_same_address_finds_an_address_only_call_but_not_a_buffer_reading_one():
    torch = pytest.importorskip("torch")
    x = torch.ones(4, 6)
    for algorithm, found in ((ByAddress(), True), (ByObject(), False)):
        cache = RepeatCache(Collection())
        cache.remember(KEY, x, None, (algorithm, None), call_on(x, x))
        view = x.view(-1)  # another object, the same memory
        other_key = ("all_reduce", id(view), id(None), "sum", None, 0)
        assert (cache.find(other_key, view, None) is not None) is found
        assert cache.find(other_key, view[:5], None) is None  # the same address, fewer elements
        assert cache.find(("all_gather",) + other_key[1:], view, None) is None
        assert cache.find(other_key[:3] + ("max",) + other_key[4:], view, None) is None


def test_a_registration_since_the_call_makes_it_a_new_call():
    collection = Collection()
    cache, x = RepeatCache(collection), view()
    cache.remember(("k",), x, None, (ByAddress(), None), call_on(x, x))
    collection.generation += 1
    assert cache.find(("k",), x, None) is None


def test_each_memo_of_a_call_is_forgotten_on_another_dtype_size_or_registration_and_follows_the_stream():
    pytest.importorskip("torch")
    import repeat_cases
    from rankpool import RankPool
    pool = RankPool(2, env={"PYMSCCLPP_TIMEOUT_S": "30"})
    try:
        seen = pool.run(repeat_cases.memo_invalidations)
    finally:
        pool.close()
    for rank in seen:
        assert rank["first"] == [
            (False, 7, "float32", 128),  # checked and chosen
            (True, 7, "float32", 128),   # repeated as the kept call
            (True, 9, "float32", 128),   # repeated, on the stream this call names
            (False, 9, "int32", 128),    # another dtype at the same address: checked afresh
            (True, 9, "float32", 128),   # a new tensor where the freed one was, alike: the same call
            (False, 9, "float32", 64),   # the same address, fewer elements: checked afresh
        ], rank
        assert rank["second"] == [(False, 9, "float32", 64), (True, 9, "float32", 64)], rank
