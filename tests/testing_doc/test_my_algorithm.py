import numpy as np
from hypothesis import given, settings, strategies as st
from numba import cuda
from pymscclpp.kernels import KernelAlgorithm, Launch, alloc, call_agreed, callcheck, memory_channel as mc, set_buffers
from pymscclpp.testing import reference, strategies as S

MAX_BYTES = 1 << 12


@cuda.jit
def my_sum(verdict, chans, inp, inbox, out, nbytes, rank):
    if not call_agreed(verdict):  # the ranks' calls differ: the call check raises, write nothing
        return
    tid, nt, n = cuda.threadIdx.x, cuda.blockDim.x, nbytes // 4
    for p in range(len(chans)):
        mc.write(chans[p], rank * nbytes, inp, 0, nbytes, tid, nt)
    cuda.syncthreads()
    if tid < len(chans):
        mc.signal(chans[tid])
        mc.wait(chans[tid])
    cuda.syncthreads()
    x, box, y = inp.view(np.float32), inbox.view(np.float32), out.view(np.float32)  # slots are bytes
    for i in range(tid, n, nt):
        acc = x[i]
        for p in range(len(chans)):
            acc += box[chans[p].peer * n + i]
        y[i] = acc
    cuda.syncthreads()
    if tid < len(chans):  # every peer has read my inbox: the next call may write it
        mc.signal(chans[tid])
        mc.wait(chans[tid])


def setup(comm) -> Launch:
    inbox = alloc(comm.size * MAX_BYTES)
    peers = [p for p in range(comm.size) if p != comm.rank]
    chans = comm.memory_channels(peers, src=inbox, inbox=inbox)
    view = chans[peers[0]].inbox
    return Launch(my_sum, 1, 32, {"verdict": callcheck(comm).verdict, "chans": tuple(chans[p].device_handle() for p in peers),
                                  "inp": view, "inbox": view, "out": view, "nbytes": 0, "rank": comm.rank})


def launch(state: Launch, call) -> None:
    set_buffers(state, call)  # slots "inp" and "out" now view the caller's buffers
    state.set_int("nbytes", call.peer_bytes)
    state.launch(call.stream)


def all_reduce_with_mine(comm, call, inputs):
    if "my_sum" not in comm.algorithms.names("all_reduce"):  # once per rank process
        comm.register_algorithm(KernelAlgorithm("my_sum", "all_reduce", setup, launch, (0, MAX_BYTES),
                                                dtypes=["float32"], ops=["sum"]))
    out = call.run(comm, inputs[comm.rank])
    assert comm.last_algorithm("all_reduce").name == "my_sum"
    return out


calls = S.collective_calls(max_ranks=3, max_count=64, collectives=["all_reduce"], dtypes=["float32"], ops=["sum"])


@settings(max_examples=4, deadline=None)
@given(st.data())
def test_my_algorithm_serves_all_reduce_as_numpy_does(ranks, data):
    call = data.draw(calls)
    inputs = data.draw(S.rank_inputs(call))
    outs = ranks(call.nranks).run(all_reduce_with_mine, call, inputs)
    for got, want in zip(outs, reference.all_reduce(inputs)):
        np.testing.assert_array_equal(got, want)
