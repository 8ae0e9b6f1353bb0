import numpy as np
from hypothesis import given, settings, strategies as st
from numba import cuda
from pymscclpp.kernels import alloc, memory_channel as mc, view_as
from pymscclpp.testing import reference, strategies as S


@cuda.jit
def allreduce(chans, inp, inbox, out, n, rank):  # the tutorial's kernel (docs/tutorial.md)
    tid, nt = cuda.threadIdx.x, cuda.blockDim.x
    for p in range(len(chans)):
        mc.put(chans[p], rank * n * 4, 0, n * 4, tid, nt)
    cuda.syncthreads()
    if tid < len(chans):
        mc.signal(chans[tid])
        mc.wait(chans[tid])
    cuda.syncthreads()
    for i in range(tid, n, nt):
        acc = inp[i]
        for p in range(len(chans)):
            acc += inbox[chans[p].peer * n + i]
        out[i] = acc


def one_shot(comm, inputs):
    x, n = inputs[comm.rank], inputs[comm.rank].size
    inp, inbox = alloc(n * 4), alloc(comm.size * n * 4)
    view_as(inp, np.float32).copy_to_device(x)
    peers = [p for p in range(comm.size) if p != comm.rank]
    chans = comm.memory_channels(peers, src=inp, inbox=inbox)
    out = cuda.device_array(n, np.float32)
    allreduce[1, 32](tuple(chans[p].device_handle() for p in peers), view_as(inp, np.float32),
                     view_as(inbox, np.float32), out, n, comm.rank)
    cuda.synchronize()
    comm.check_device_errors()
    return out.copy_to_host()


calls = S.collective_calls(max_ranks=3, max_count=32, collectives=["all_reduce"], dtypes=["float32"], ops=["sum"])


@settings(max_examples=4, deadline=None)
@given(st.data())
def test_one_shot_all_reduce_matches_numpy(ranks, data):
    call = data.draw(calls)
    inputs = data.draw(S.rank_inputs(call))
    outs = ranks(call.nranks).run(one_shot, inputs)
    for got, want in zip(outs, reference.all_reduce(inputs)):
        np.testing.assert_array_equal(got, want)
