"""Compile every PortChannel kernel of the tests and benchmarks to sm_90 PTX, with no GPU.

Run with PYMSCCLPP_BACKEND=compile; prints ``<kernel> <instruction> <count>`` lines that
tests/test_port_channel_ptx.py checks, so GPU codegen errors in the FIFO push, flush and
wait paths surface in CI.
"""

from __future__ import annotations

import os
import sys
import types as pytypes

os.environ["PYMSCCLPP_BACKEND"] = "compile"
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import pymscclpp  # noqa: E402,F401
import numba.cuda.dispatcher as _dispatcher  # noqa: E402
from numba import cuda, types  # noqa: E402

_dispatcher.get_current_device = lambda: pytypes.SimpleNamespace(compute_capability=(9, 0))

import port_cases  # noqa: E402
import pymscclpp.bench.port_channel as bench  # noqa: E402
from pymscclpp.proxy.port_channel import PortChannelHandle  # noqa: E402
from pymscclpp.algos.exchange_port import Unused  # noqa: E402
from pymscclpp.algos.exchange_port_kernels import peer_exchange_port  # noqa: E402

U64, I64, I32, U8 = (types.Array(t, 1, "C") for t in (types.uint64, types.int64, types.int32, types.uint8))
i64, u64, b1 = types.int64, types.uint64, types.boolean
CHANNEL = types.NamedTuple([U64, U64, U64, U64, u64, U64, U64, I64, U64, i64, i64, i64, u64, i64, i64],
                           PortChannelHandle)

KERNELS = {
    "ring": (port_cases._ring_kernel, (CHANNEL, CHANNEL, i64, i64, i64, i64, i64, I32)),
    "scatter": (port_cases._scatter_kernel, (CHANNEL, CHANNEL, i64, I32)),
    "poll": (port_cases._poll_kernel, (CHANNEL, I32)),
    "signal": (port_cases._signal_kernel, (CHANNEL, I32)),
    "bad_put": (port_cases._bad_put_kernel, (CHANNEL, CHANNEL, b1, I32)),
    "bench_put_bw": (bench.put_bw, (CHANNEL, i64, i64, b1, U64)),
    "bench_pingpong": (bench.pingpong, (CHANNEL, i64, i64, b1, b1, U64)),
    "bench_push_to_completion": (bench.push_to_completion, (CHANNEL, i64, i64, U64)),
    "bench_trigger_storm": (bench.trigger_storm, (CHANNEL, i64, b1, U64)),
    # the verbs across hosts, on 3 ranks: two channels a peer, the table, four byte buffers
    "peer_exchange_port": (peer_exchange_port, (types.UniTuple(CHANNEL, 2), types.UniTuple(CHANNEL, 2),
                                      types.UniTuple(types.NamedTuple([U8], Unused), 1), types.UniTuple(i64, 18),
                                      U8, U8, U8, U8, i64, i64, i64, i64, i64, i64)),
}
PATTERNS = ["atom.global.add.u64", "st.release.sys.global.b64", "st.relaxed.sys.global.b64",
            "ld.acquire.sys.global.b64", "ld.relaxed.sys.global.b64", "%globaltimer", "atom.global.max.u64"]

if __name__ == "__main__":  # bench/registers.py imports KERNELS
    for name, (kernel, sig) in KERNELS.items():
        ptx, _ = cuda.compile_ptx(kernel.py_func, sig, cc=(9, 0))
        for pat in PATTERNS:
            print(name, pat, ptx.count(pat))
