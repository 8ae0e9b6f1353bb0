"""The cross-rank call check on real GPUs: ``mpirun -np N python tests/gpu/run_callcheck.py``: the last rank's call
differs (one-shot kernels, plans used as they are, staged and in place from another buffer, a user's kernel that
gates on the verdict and one that does not), every rank must raise naming both sides; then matched calls of every
checked kind, interleaved, with the check on and off (``tests/fault/callcheck_cases.py``, as the simulator runs)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from mpi4py import MPI  # noqa: E402

import pymscclpp  # noqa: E402
from fault import callcheck_cases as cases  # noqa: E402
from gpu.runner import run_cases  # noqa: E402


def mismatch(comm, state, mismatch: str, algorithm: str | None = None, untouched: bool = True,
             where: str = "kernel") -> None:
    """``cases.mismatched_calls`` of ``cases.MISMATCHES[mismatch]`` (or ``ODD_SIZES``), checked on this rank."""
    calls, texts = cases.odd_one_out({**cases.MISMATCHES, "odd sizes": cases.ODD_SIZES}[mismatch], comm.size)
    cases.check_mismatch(comm.rank, cases.mismatched_calls(comm, state, calls, algorithm), texts, untouched,
                        where)


def mixed(comm, state, check: str) -> None:
    """``cases.mixed_calls`` with PYMSCCLPP_CHECK=``check``: every checked call took the next number (or none)."""
    os.environ["PYMSCCLPP_CHECK"] = check
    try:
        assert cases.mixed_calls(comm, state) == ([8] if check == "1" else [0])
    finally:
        os.environ.pop("PYMSCCLPP_CHECK")


def main() -> int:
    comm = pymscclpp.Communicator.from_mpi(MPI.COMM_WORLD)
    plan = [(mismatch, dict(mismatch="sizes")), (mismatch, dict(mismatch="collectives"))]
    plan += [(mismatch, dict(mismatch=m, algorithm=a)) for m, a in
             [("sizes", "plan"), ("odd sizes", "plan"), ("sizes", "plan_inplace")]]
    plan += [(mismatch, dict(mismatch="all_gather send sizes", algorithm="gated", where="ahead")),
             (mismatch, dict(mismatch="sizes", algorithm="ungated", untouched=False, where="ahead"))]
    plan += [(mixed, dict(check="1")), (mixed, dict(check="0"))]
    failures = run_cases(comm, plan, f"call check ({comm.size} ranks)")
    comm.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
