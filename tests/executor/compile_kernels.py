"""Compile generated executor kernels (GPU variant) of the library and feature programs to sm_90 PTX, no GPU.

Run with PYMSCCLPP_BACKEND=compile (``python tests/executor/compile_kernels.py``); prints
``<program> <ranks> <rank> <dtype> <size class> <ptx bytes> <instruction counts>`` per kernel, so GPU codegen
errors (typing, intrinsics) in generated code surface in CI.
"""

from __future__ import annotations

import os
import sys
import types as pytypes

os.environ["PYMSCCLPP_BACKEND"] = "compile"
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import pymscclpp  # noqa: E402,F401
import numba.cuda.dispatcher as _dispatcher  # noqa: E402
from numba import cuda, types  # noqa: E402

# device functions ask the current GPU for its compute capability; there is none here
_dispatcher.get_current_device = lambda: pytypes.SimpleNamespace(compute_capability=(9, 0))

from executor.programs import FEATURE_PROGRAMS  # noqa: E402
from pymscclpp.channels.reduce import DTYPE_KINDS, OPS  # noqa: E402
from pymscclpp.executor.cache import load_module  # noqa: E402
from pymscclpp.executor.codegen import KernelSpec  # noqa: E402
from pymscclpp.executor.plan import ExecutionPlan  # noqa: E402
from pymscclpp.language.programs import PROGRAMS  # noqa: E402
from pymscclpp.runtime.device_errors import WaitContext  # noqa: E402
from pymscclpp.language.programs.hierarchical import allreduce_hierarchical  # noqa: E402
from pymscclpp.proxy.port_channel import PortChannelHandle  # noqa: E402
from pymscclpp.runtime.semaphore import SemaphoreHandle  # noqa: E402
from pymscclpp.callcheck.area import handle_type as callcheck  # noqa: E402
from pymscclpp.runtime.handle_types import BYTES as U8, I64, U64  # noqa: E402

SEM = types.NamedTuple([U64, U64, U64, I64, U64, types.int64, types.int64, types.int64, types.uint64], SemaphoreHandle)
WCTX = types.NamedTuple([I64, U64, types.int64, types.int64, types.int64, types.uint64], WaitContext)
PORT = types.NamedTuple([U64, U64, U64, U64, types.uint64, U64, U64, I64, U64, types.int64, types.int64, types.int64,
                         types.uint64, types.int64, types.int64], PortChannelHandle)
ARG_TYPES = {"pid": I64, "st": U64, "err": I64, "abort_flag": U64, "timeout_ns": types.uint64, "wait_context": WCTX,
             "chunk": types.int64, "fingerprint": types.int64}
ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2, "int32": 4}
PATTERNS = ["ld.global.v4.u32", "st.global.v4.u32", "st.volatile.global.v4.u32", "red.release.sys.global.add",
            "ld.acquire.sys.global", "bar.sync"]

CASES = [  # (program, kwargs, ranks, dtype, size class)
    ("allreduce_allpairs", {}, 2, "float32", 0), ("allreduce_allpairs", {"protocol": "packet"}, 2, "float16", 512),
    ("allreduce_allpairs", {"protocol": "packet", "instances": 2}, 3, "bfloat16", 0),
    ("allreduce_rsag", {}, 2, "int32", 0),
    ("allgather", {}, 2, "float32", 0), ("allgather", {"protocol": "packet"}, 4, "float32", 1024),
    ("reducescatter", {"protocol": "packet"}, 3, "float16", 0), ("reducescatter", {}, 2, "float32", 0),
    ("alltoall", {}, 3, "int32", 0),
] + [(name, {}, 2, "float32", 0) for name in FEATURE_PROGRAMS] + [  # port channels between faked hosts
    ("allreduce_allpairs", {"protocol": "packet", "hosts": [0, 1]}, 2, "float32", 0),
    ("allgather", {"hosts": [0, 0, 1]}, 3, "float32", 0), ("allreduce_hierarchical", {}, 4, "float32", 0),
]
CHECKED = [("allgather", {}, 2, "float32", 1024)]


def main() -> int:
    programs = {**PROGRAMS, **FEATURE_PROGRAMS,
                "allreduce_hierarchical": lambda n: allreduce_hierarchical([r // 2 for r in range(n)])}
    for (name, kwargs, n, dtype, size_class), checked in [(c, False) for c in CASES] + [(c, True) for c in CHECKED]:
        xplan = ExecutionPlan.from_plan(programs[name](n, **kwargs))
        kind = DTYPE_KINDS[dtype] if xplan.reduces else None
        spec = KernelSpec(xplan, 0, kind, OPS["sum"], ITEMSIZE[dtype], size_class, 0, checked)
        module, _ = load_module(spec)
        types_of = {**ARG_TYPES, "call_check": callcheck(n - 1)}
        sig = tuple(SEM if a.startswith("sem") else PORT if a.startswith("pc") else types_of.get(a, U8)
                    for a in spec.arg_names)
        ptx, _ = cuda.compile_ptx(module.kernel.py_func, sig, cc=(9, 0))
        counts = " ".join(f"{p}={ptx.count(p)}" for p in PATTERNS)
        packets = "_packet" if kwargs.get("protocol") == "packet" else ""
        label = (f"{name}{packets}{'_ports' if 'hosts' in kwargs else ''}"
                 f"{'_checked' if checked else ''}")
        print(f"{label} {n} 0 {dtype} {size_class} {len(ptx)} {counts}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
