import numpy as np
from hypothesis import given, settings, strategies as st
from pymscclpp.language.channel import MemoryChannel
from pymscclpp.language.collectives import AllGather
from pymscclpp.language.program import CollectiveProgram
from pymscclpp.language.rank import Rank
from pymscclpp.testing import reference, strategies as S


def my_allgather(n: int) -> CollectiveProgram:  # docs/dsl.md's all-pairs allgather
    with CollectiveProgram("my_allgather", AllGather(n, 1, False), n) as prog:
        ch = {(r, p): MemoryChannel(p, r) for r in range(n) for p in range(n) if p != r}
        for r in range(n):
            me, src = Rank(r), Rank(r).get_input_buffer()[0:1]
            peers = [p for p in range(n) if p != r]
            for p in peers:
                ch[r, p].signal(tb=0)
            for p in peers:
                ch[r, p].wait(tb=0)
            for p in peers:
                ch[r, p].put(Rank(p).get_output_buffer()[r:r + 1], src, tb=0)
            me.copy(me.get_output_buffer()[r:r + 1], src, tb=0)
            for p in peers:
                ch[r, p].signal(tb=0)
            for p in peers:
                ch[r, p].wait(tb=0)
    return prog


def all_gather_with_mine(comm, call, inputs):
    if "my_allgather" not in comm.algorithms.names("all_gather"):
        comm.register_algorithm(my_allgather(comm.size))
    return call.run(comm, inputs[comm.rank], algo="my_allgather")


calls = S.collective_calls(max_ranks=3, max_count=16, collectives=["all_gather"], dtypes=["float32", "int32"])


@settings(max_examples=4, deadline=None)
@given(st.data())
def test_my_plan_gathers_as_numpy_does(ranks, data):
    call = data.draw(calls)
    inputs = data.draw(S.rank_inputs(call))
    outs = ranks(call.nranks).run(all_gather_with_mine, call, inputs)
    for got, want in zip(outs, reference.all_gather(inputs)):
        np.testing.assert_array_equal(got, want)
