"""Compile every device kernel of the Primitive API tests and benchmarks to sm_90 PTX, with no GPU.

Run with PYMSCCLPP_BACKEND=compile; prints ``<kernel> <instruction> <count>`` lines that the
test checks, so GPU codegen errors (typing, intrinsics) surface in CI.
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

# device functions ask the current GPU for its compute capability; there is none here
_dispatcher.get_current_device = lambda: pytypes.SimpleNamespace(compute_capability=(9, 0))

import channel_cases  # noqa: E402
import test_reduce  # noqa: E402
import pymscclpp.bench.memory_channel as bench  # noqa: E402
from pymscclpp.callcheck import area as cck  # noqa: E402
from pymscclpp.algos.entries import entry_kernels  # noqa: E402
from pymscclpp.runtime.handle_types import BYTES as U8, U32, memory_channel  # noqa: E402

CHANNEL = memory_channel()
i64, b1 = types.int64, types.boolean

KERNELS = {
    "ring_pingpong": (channel_cases._ring_pingpong_kernel, (CHANNEL, CHANNEL, i64)),
    "put": (channel_cases._put_kernel, (CHANNEL, CHANNEL, i64, i64, i64)),
    "get": (channel_cases._get_kernel, (CHANNEL, i64, i64, i64)),
    "packets": (channel_cases._packet_kernel, (CHANNEL, CHANNEL, U32, i64, i64, i64, i64, b1)),
    "reduce_bytes": (test_reduce._kernel, (U8, i64, U8, i64, U8, i64, i64, i64, i64)),
    # the one-shot kernels as a communicator of 4 ranks declares them: one entry kernel per protocol
    "reduce_ll_2ranks": entry_kernels(2)["reduce_ll"],
    **entry_kernels(4),
    # the exchange kernel reads its per-peer table at runtime indices: its code must not grow with the table
    "peer_read_simple_2ranks": entry_kernels(2)["peer_read_simple"],
    "peer_read_simple_8ranks": entry_kernels(8)["peer_read_simple"],
    # the call check of kernels that are not one-shot ones: alone, and the copies gated on its verdict
    "check_kernel": (cck.check_kernel, (cck.handle_type(3), i64, i64, i64, i64)),
    "copy_if_agreed": (cck.copy_if_agreed, (U32, U8, U8)),
    "bench_put": (bench.put_kernel, (CHANNEL, i64)),
    "bench_write_only": (bench.write_only_kernel, (CHANNEL, i64)),
    "bench_get": (bench.get_kernel, (CHANNEL, i64)),
    "bench_signal_pingpong": (bench.signal_pingpong, (CHANNEL, i64, b1)),
    "bench_packet_pingpong": (bench.packet_pingpong, (CHANNEL, i64, b1, i64, b1)),
}
PATTERNS = ["ld.global.v4.u32", "st.global.v4.u32", "red.release.sys.global.add", "red.relaxed.sys",
            "ld.acquire.sys.global", "st.volatile.global.v4.u32", "ld.volatile.global.v4.u32",
            "st.volatile.global.v2.u32", "ld.volatile.global.v2.u32", "%globaltimer", "ld.relaxed.sys.global.b64",
            "add.rn.f16x2"]

for name, (kernel, sig) in KERNELS.items():
    ptx, _ = cuda.compile_ptx(kernel.py_func, sig, cc=(9, 0))
    for pat in PATTERNS:
        print(name, pat, ptx.count(pat))
    print(name, "lines", ptx.count("\n"))
