"""Plans with port channels run through the executor's proxy and match the interpreter, on the simulator,
with hosts faked by PYMSCCLPP_HOST_ID (Ethernet between hosts, CudaIpc within one)."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from executor import cases, oracle
from pymscclpp.executor import ExecutionPlan
from pymscclpp.language.interpreter import check_plan, run_plan
from pymscclpp.language.programs.hierarchical import COLLECTIVES, plan_for
from rankpool import PoolCache

_dir = tempfile.mkdtemp(prefix="pymscclpp-executor-ports-")
_ENV = {"PYMSCCLPP_TIMEOUT_S": "30", "PYMSCCLPP_CACHE_DIR": os.path.join(_dir, "cache")}
_pools = PoolCache(env=_ENV)


def pool(hosts: tuple[int, ...], transport: str = ""):
    """Rank processes whose host ids are ``hosts[r]``, with PYMSCCLPP_TRANSPORT=``transport`` (one pool per
    layout and transport, kept for the module)."""
    return _pools(len(hosts), [{"PYMSCCLPP_HOST_ID": f"host{h}", "PYMSCCLPP_TRANSPORT": transport} for h in hosts])


@pytest.fixture(scope="module", autouse=True)
def _close_pools():
    yield
    _pools.close()


def run(plan, hosts: tuple[int, ...], count: int, seed: int, dtype: str = "float32", executions: int = 2,
        transport: str = "", **kw) -> None:
    """Run a plan on every rank of the layout and compare each execution with the interpreter."""
    xplan = ExecutionPlan.from_plan(plan)
    inputs = oracle.make_inputs(xplan, dtype, count, seed, executions)
    expected = oracle.expected_outputs(xplan, inputs, count, "sum")
    path = cases.write_case(os.path.join(_dir, f"case-{xplan.key}-{count}-{seed}.pkl"), xplan.plan.to_json(),
                            inputs, expected)
    pool(hosts, transport).run(cases.run_case, path=path, **kw)


# -- MSCCL++'s own multi-node DSL programs, read from a checkout at test time ---------------------------

MSCCLPP_TESTS_ENV = "PYMSCCLPP_MSCCLPP_MULTI_NODE"  # a directory holding MSCCL++'s tests/multi_node/*.py
MULTI_NODE = {  # program file -> (arguments for 2 ranks per node, executions its synchronization allows)
    "allgather": (["--gpus_per_node", "2"], 2),
    "allgather_pkt": (["--gpus_per_node", "2"], 2),
    "allgather_tbg": (["--num_gpus", "4", "--gpus_per_node", "2", "--tbg_size", "2"], 2),
    "reducescatter": (["--gpus_per_node", "2"], 1),  # its last wait is relaxed: execution 2 would race
    "reducescatter_pkt": (["--gpus_per_node", "2"], 2),
    "send_recv": (["--nnodes", "2", "--gpus_per_node", "2"], 1),  # its puts are never flushed
}


def mscclpp_plan(name: str, args: list[str]) -> dict:
    """Generate the plan of MSCCL++ program ``name`` with our DSL (its imports rewritten to pymscclpp)."""
    import json
    import re
    import subprocess
    import sys
    root = os.environ.get(MSCCLPP_TESTS_ENV)
    if not root or not os.path.isfile(os.path.join(root, f"{name}.py")):
        pytest.skip(f"{MSCCLPP_TESTS_ENV} does not name a directory with MSCCL++'s {name}.py")
    with open(os.path.join(root, f"{name}.py"), encoding="utf-8") as f:
        source = f.read().replace("from mscclpp.language", "from pymscclpp.language")
    source = re.sub(r"^import mscclpp\s*$", "", source, flags=re.M)
    path = os.path.join(_dir, f"mscclpp_{name}.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(source)
    made = subprocess.run([sys.executable, path, "--name", name, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYMSCCLPP_BACKEND": "sim"})
    assert made.returncode == 0, made.stderr
    return json.loads(made.stdout[made.stdout.index("{"):])


@pytest.mark.parametrize("name", sorted(MULTI_NODE))
def test_mscclpp_multi_node_programs_verify_and_run_across_two_hosts(name):
    args, executions = MULTI_NODE[name]
    plan = mscclpp_plan(name, args)
    check_plan(plan, executions=executions)
    run(plan, (0, 0, 1, 1), 40, seed=3, executions=executions)


# -- the cross-host programs of pymscclpp.language.programs.hierarchical ------------------------------

LAYOUTS = {"2x2": (0, 0, 1, 1), "2x1": (0, 1), "2+1": (0, 0, 1)}
CHOICES = [(c, p) for c in COLLECTIVES for p in ("simple", "packet")
           if p == "simple" or c not in ("alltoall", "broadcast")]


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("collective,protocol", CHOICES)
def test_cross_host_programs_verify_and_run_through_the_executor(layout, collective, protocol):
    hosts = LAYOUTS[layout]
    plan = plan_for(collective, hosts, protocol)
    check_plan(plan)
    count = {"2x2": 24, "2x1": 1100, "2+1": 5}[layout]  # 16-byte chunks; chunks past SMALL_CHUNK; padded parts
    run(plan, hosts, count, seed=len(hosts))


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(choice=st.sampled_from(CHOICES), count=st.integers(1, 1100), seed=st.integers(0, 2**16))
def test_cross_host_programs_on_an_uneven_layout_at_any_size(choice, count, seed):
    collective, protocol = choice
    run(plan_for(collective, LAYOUTS["2+1"], protocol), LAYOUTS["2+1"], count, seed=seed)


def test_broadcast_plan_copies_the_root_input_everywhere():
    hosts = (0, 0, 1)
    for root in range(3):
        plan = plan_for("broadcast", hosts, root=root)
        check_plan(plan)
        inputs = [np.arange(8, dtype=np.float32) + 100 * r for r in range(3)]
        for out in run_plan(plan, [inputs], chunk_bytes=32)[0]:
            np.testing.assert_array_equal(out, inputs[root])
    run(plan_for("broadcast", hosts, root=2), hosts, 33, seed=5)


def _plan_for_other_layout(comm, state) -> str:
    """Rank 0 takes the plan of the real layout, the others one for hosts (0, 1): both must fail."""
    hosts = LAYOUTS["2+1"] if comm.rank == 0 else (0, 1, 0)
    return cases.expect_error(comm, state, ExecutionPlan.from_plan(plan_for("allreduce", hosts)).plan.to_json(), 8,
                              "float32")


def test_ranks_with_plans_for_different_host_layouts_fail_at_setup_on_every_rank():
    errors = pool(LAYOUTS["2+1"]).run(_plan_for_other_layout)
    for r, text in enumerate(errors):
        assert text.startswith("PlanError: plan "), text
        assert "set up a different plan than rank" in text and "host 0: ranks [0, 1]" in text, text


@pytest.mark.parametrize("kind", ["plain", "registered"])
def test_port_channels_within_one_host_run_over_cuda_ipc(kind):
    from executor.programs import allgather_port
    run(allgather_port(2), (0, 0), 40, seed=7, kind=kind)
    assert set(pool((0, 0)).run(_port_transports)) == {"CUDA_IPC"}


def _port_transports(comm, state) -> str:
    return cases.executor(comm, state).proxy.transport(1 - comm.rank).name


def test_ports_between_hosts_use_ethernet_and_the_environment_overrides_the_transport():
    from executor.programs import allgather_port
    run(allgather_port(2), (0, 1), 8, seed=8)
    assert set(pool((0, 1)).run(_port_transports)) == {"ETHERNET"}
    run(allgather_port(2), (0, 0), 8, seed=9, transport="ethernet")
    assert set(pool((0, 0), "ethernet").run(_port_transports)) == {"ETHERNET"}


def test_forcing_ib_without_an_rdma_device_fails_at_setup_on_every_rank():
    from pymscclpp.transports import ib
    if ib.problem() is None:
        pytest.skip("this machine has a usable RDMA device")
    plan_json = ExecutionPlan.from_plan(plan_for("allreduce", (0, 1))).plan.to_json()
    errors = pool((0, 1), "ib").run(cases.expect_error, plan_json=plan_json, count=8, dtype="float32")
    for text in errors:
        assert text.startswith("InvalidUsageError") and "transport ib was forced" in text, text


def test_memory_channel_plan_across_hosts_is_refused_naming_the_layout():
    from pymscclpp.language.programs import PROGRAMS
    plan_json = ExecutionPlan.from_plan(PROGRAMS["allreduce_allpairs"](2)).plan.to_json()
    for text in pool((0, 1)).run(cases.expect_error, plan_json=plan_json, count=8, dtype="float32"):
        assert text.startswith("PlanError") and "memory channels to ranks" in text, text
        assert "host 0: ranks [0]; host 1: ranks [1]" in text and "plan_for" in text, text


def test_hierarchical_all_reduce_replicated_over_thread_blocks_runs():
    hosts = LAYOUTS["2x2"]
    run(plan_for("allreduce", hosts, instances=2), hosts, 40, seed=11)


def _proxy_memories_over_fresh_buffers(comm, state, path: str, calls: int) -> list[int]:
    """The proxy's memory count after each of ``calls`` runs of the stored case, each with new process-local
    buffers (so staged through the executor's own buffers: every call exposes the same memory again)."""
    counts = []
    for _ in range(calls):
        cases.run_case(comm, state, path, kind="plain")
        counts.append(cases.executor(comm, state).proxy.memory_count)
    return counts


@pytest.mark.parametrize("hosts", [(0, 1), (0, 0)])
def test_exposing_the_same_memory_again_does_not_grow_the_proxy_memory_table(hosts):
    from executor.programs import allgather_port
    xplan = ExecutionPlan.from_plan(allgather_port(2))
    inputs = oracle.make_inputs(xplan, "float32", 8, 3, 2)
    path = cases.write_case(os.path.join(_dir, f"fresh-{hosts}.pkl"), xplan.plan.to_json(), inputs,
                            oracle.expected_outputs(xplan, inputs, 8, "sum"))
    for counts in pool(hosts).run(_proxy_memories_over_fresh_buffers, path=path, calls=3):
        assert len(set(counts)) == 1, counts
