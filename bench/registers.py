"""Registers per thread and machine code of the GPU kernels, with no GPU: each kernel to sm_90 PTX (numba-cuda),
then ``ptxas -v``.

``python bench/registers.py [--ranks 4] [--executor] [--ptxas PATH]`` prints ``<kernel> <registers> <spill stores>
<code bytes>`` per kernel, under the register cap its launches compile it with: the built-in entry kernels
(``algos/entries.py``, for ``--ranks`` ranks, and reduce_ll for 2), the PortChannel kernels of the tests, and with
``--executor`` the generated executor kernels of ``tests/executor/compile_kernels.py``. Run it before and after a
change to device code (waits, primitives) to see what it costs in registers and code (code that grows with the rank
count is time: docs/performance.md).
"""

from __future__ import annotations

import argparse
import os
import re
import struct
import subprocess
import sys
import tempfile
import types as pytypes
from pathlib import Path

os.environ["PYMSCCLPP_BACKEND"] = "compile"
os.environ.setdefault("PYMSCCLPP_CACHE_DIR", tempfile.mkdtemp(prefix="pymscclpp-registers-"))  # generated code
TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path[:0] = [str(TESTS), str(TESTS / "ptx")]

import pymscclpp  # noqa: E402,F401
import numba.cuda.dispatcher as _dispatcher  # noqa: E402
from numba import cuda  # noqa: E402

# device functions ask the current GPU for its compute capability; there is none here
_dispatcher.get_current_device = lambda: pytypes.SimpleNamespace(compute_capability=(9, 0))

from pymscclpp.algos.entries import entry_kernels  # noqa: E402

_USED = re.compile(r"Used (\d+) registers")
_SPILL = re.compile(r"(\d+) bytes spill stores")


def code_bytes(cubin: bytes) -> int:
    """Bytes of machine code in an ELF64 cubin: the sizes of its ``.text.*`` sections."""
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", cubin, shoff + i * shentsize) for i in range(shnum)]  # name .. size
    names = headers[shstrndx][4]
    return sum(h[5] for h in headers if cubin[names + h[0]:cubin.index(b"\0", names + h[0])].startswith(b".text."))


def registers(ptx: str, ptxas: str, max_registers: int | None = None) -> tuple[int, int, int]:
    """(registers, spill-store bytes, code bytes) of the one entry in ``ptx`` (its PTX ISA version lowered to
    ptxas's 9.0), under the kernel's register cap as its launches compile it (``max_registers``; None: none)."""
    ptx = re.sub(r"^\.version \d+\.\d+", ".version 9.0", ptx, count=1, flags=re.M)
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(ptx)
    cubin = f.name + ".cubin"
    try:
        cap = [f"-maxrregcount={max_registers}"] if max_registers else []
        out = subprocess.run([ptxas, "-arch=sm_90", "-v", *cap, f.name, "-o", cubin], capture_output=True,
                             text=True, check=True).stderr
        code = code_bytes(Path(cubin).read_bytes())
    finally:
        os.unlink(f.name)
        if os.path.exists(cubin):
            os.unlink(cubin)
    return int(_USED.findall(out)[-1]), sum(int(s) for s in _SPILL.findall(out)), code


def kernels(executor: bool, nranks: int = 4):
    """(name, kernel, signature, register cap) of every kernel measured (the entry kernels for ``nranks`` ranks)."""
    entries = {"reduce_ll_2ranks": entry_kernels(2)["reduce_ll"], **entry_kernels(nranks)}
    for name, (kernel, sig) in entries.items():
        yield name, kernel.py_func, sig, kernel.targetoptions.get("max_registers")
    import compile_port
    for name, (kernel, sig) in compile_port.KERNELS.items():
        yield f"port_{name}", kernel.py_func, sig, kernel.targetoptions.get("max_registers")
    if executor:
        yield from _executor_kernels()


def _executor_kernels():
    sys.path.insert(0, str(TESTS / "executor"))
    import compile_kernels as ck
    from pymscclpp.channels.reduce import DTYPE_KINDS, OPS
    from pymscclpp.executor.cache import load_module
    from pymscclpp.executor.codegen import KernelSpec
    from pymscclpp.executor.plan import ExecutionPlan
    from pymscclpp.language.programs.hierarchical import allreduce_hierarchical
    programs = {**ck.PROGRAMS, **ck.FEATURE_PROGRAMS,
                "allreduce_hierarchical": lambda n: allreduce_hierarchical([r // 2 for r in range(n)])}
    for name, kwargs, n, dtype, size_class in ck.CASES:
        xplan = ExecutionPlan.from_plan(programs[name](n, **kwargs))
        kind = DTYPE_KINDS[dtype] if xplan.reduces else None
        spec = KernelSpec(xplan, 0, kind, OPS["sum"], ck.ITEMSIZE[dtype], size_class, 0, False)
        module, _ = load_module(spec)
        types_of = {**ck.ARG_TYPES, "call_check": ck.callcheck(n - 1)}
        sig = tuple(ck.SEM if a.startswith("sem") else ck.PORT if a.startswith("pc") else types_of.get(a, ck.U8)
                    for a in spec.arg_names)
        label = f"exec_{name}{'_packet' if kwargs.get('protocol') == 'packet' else ''}{'_ports' if 'hosts' in kwargs else ''}"
        yield f"{label}_{n}r", module.kernel.py_func, sig, module.kernel.targetoptions.get("max_registers")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, default=4, help="the rank count the entry kernels are built for")
    parser.add_argument("--executor", action="store_true", help="also the generated executor kernels")
    parser.add_argument("--ptxas", default="/usr/local/cuda/bin/ptxas")
    args = parser.parse_args(argv)
    for name, func, sig, cap in kernels(args.executor, args.ranks):
        ptx, _ = cuda.compile_ptx(func, sig, cc=(9, 0))
        regs, spills, code = registers(ptx, args.ptxas, cap)
        print(f"{name} {regs} {spills} {code}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
