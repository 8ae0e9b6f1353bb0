"""Generated executor kernels match the reference interpreter, across rank processes on the simulator.

One pool of rank processes per rank count; hypothesis draws a program, a message (odd element counts
included), a dtype and how the buffers are given; every rank runs it for two executions with the same buffers (the interpreter's default).
"""

from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from executor import cases, oracle
from executor.programs import FEATURE_PROGRAMS
from pymscclpp.executor import ExecutionPlan
from pymscclpp.language.programs import PROGRAMS
from rankpool import PoolCache

_dir = tempfile.mkdtemp(prefix="pymscclpp-executor-cases-")
_ENV = {"PYMSCCLPP_TIMEOUT_S": "30", "PYMSCCLPP_CACHE_DIR": os.path.join(_dir, "cache")}


pool = PoolCache(env=_ENV)


@pytest.fixture(scope="module", autouse=True)
def _close_pools():
    yield
    pool.close()


def run(plan: dict, size: int, dtype: str, count: int, seed: int, op: str = "sum", executions: int = 2, **kw) -> bool:
    """Run a case on every rank; whether the executor used the buffers in place."""
    xplan = ExecutionPlan.from_plan(plan)
    inputs = oracle.make_inputs(xplan, dtype, count, seed, executions)
    expected = oracle.expected_outputs(xplan, inputs, count, op)
    path = cases.write_case(os.path.join(_dir, f"case-{seed}-{size}.pkl"), xplan.plan.to_json(), inputs, expected)
    return pool(size).run(cases.run_case, path=path, op=op, **kw)[0]


LIBRARY = [("allreduce_allpairs", {}), ("allreduce_allpairs", {"protocol": "packet"}), ("allreduce_rsag", {}),
           ("allgather", {}), ("allgather", {"protocol": "packet"}), ("reducescatter", {}),
           ("reducescatter", {"protocol": "packet"}), ("alltoall", {})]
DTYPES = ["float16", "bfloat16", "float32", "int32"]


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(program=st.sampled_from(LIBRARY), size=st.sampled_from([2, 3, 4]), dtype=st.sampled_from(DTYPES),
       count=st.integers(1, 300), seed=st.integers(0, 2**16), variant=st.sampled_from(["plain", "inplace", "instances"]),
       registered=st.booleans())
def test_library_programs_match_the_interpreter(program, size, dtype, count, seed, variant, registered):
    name, kwargs = program
    kwargs = dict(kwargs)
    if variant == "inplace" and name != "alltoall":
        kwargs["inplace"] = True
    if variant == "instances":
        kwargs["instances"] = 2
    run(PROGRAMS[name](size, **kwargs), size, dtype, count, seed, kind="registered" if registered else "plain")


@pytest.mark.parametrize("name", sorted(FEATURE_PROGRAMS))
@pytest.mark.parametrize("size", [2, 3])
def test_groups_pipelines_barriers_semaphores_and_packet_forwarding_match_the_interpreter(name, size):
    run(FEATURE_PROGRAMS[name](size), size, "float32", 37 + size, seed=size, kind="registered" if size == 3 else "plain")


@pytest.mark.parametrize("op", ["min", "max"])
def test_reduction_op_applies_to_every_reduce(op):
    run(PROGRAMS["allreduce_allpairs"](2, protocol="packet"), 2, "int32", 50, seed=5, op=op)
    run(PROGRAMS["allreduce_rsag"](3), 3, "float16", 50, seed=6, op=op)


def test_registered_buffers_of_whole_chunks_are_used_in_place():
    plan = PROGRAMS["allreduce_allpairs"](2)
    assert run(plan, 2, "float32", 64, seed=1, kind="registered")
    assert not run(plan, 2, "float32", 63, seed=2, kind="registered")  # odd count: padded and staged
    assert not run(plan, 2, "float32", 64, seed=3, kind="plain")  # process-local: not registrable


def test_in_place_call_on_one_buffer():
    run(PROGRAMS["allreduce_allpairs"](3, inplace=True), 3, "float32", 48, seed=4, kind="registered", same_buffer=True)
    run(PROGRAMS["allreduce_rsag"](2, inplace=True), 2, "int32", 33, seed=5, same_buffer=True)


def test_simulator_runs_thread_blocks_that_wait_on_each_other_with_one_thread_each():
    pool(2).run(cases.set_sim_threads, threads=1)
    try:
        run(FEATURE_PROGRAMS["allgather_groups"](2), 2, "float32", 40, seed=8)
    finally:
        pool(2).run(cases.set_sim_threads, threads=2)


def _bench_program():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "bench" / "executor.py"
    loader = importlib.util.spec_from_file_location("bench_executor", path)
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module.oneshot_allreduce


@pytest.mark.parametrize("protocol", ["packet", "simple"])
def test_benchmarked_one_shot_allreduce_matches_the_interpreter(protocol):
    oneshot = _bench_program()
    run(oneshot(2, protocol, 2, 64), 2, "float32", 256, seed=9, kind="registered")
    run(oneshot(3, protocol, 1, 64), 3, "bfloat16", 99, seed=10)
