"""The executor runs our programs of the features MSCCL++'s DSL tests use: send/recv rings, packet forwards to
several peers, and plans without input or output chunks (they move scratch only), checked against the
interpreter on the simulator."""

from __future__ import annotations

import os
import tempfile

import pytest

from executor import cases, oracle
from executor.programs import rank0_only
from language.parity_programs import allgather_forward_packets, scratch_exchange, sendrecv_ring
from pymscclpp.executor import ExecutionPlan
from pymscclpp.executor.layout import message_layout
from pymscclpp.plan import PlanError
from pymscclpp.language.collectives import TestCollective
from pymscclpp.language.program import CollectiveProgram
from pymscclpp.language.rank import Rank
from rankpool import RankPool


def _input_only(n: int) -> dict:
    """Two input chunks, no output: each rank copies its first input chunk over its second."""
    with CollectiveProgram("input_only", TestCollective(n, 2, 0), n) as prog:
        for r in range(n):
            inp = Rank(r).get_input_buffer()
            Rank(r).copy(inp[1:2], inp[0:1], tb=0)
        return prog.to_dict()


def test_zero_chunk_plan_lays_out_in_alignment_sized_chunks():
    lay = message_layout(ExecutionPlan.from_plan(scratch_exchange(2)), 0, 0, 0, 4)
    assert (lay.chunk, lay.in_slots(), lay.out_slots()) == (16, [], [])


def test_plan_with_only_input_chunks_sizes_chunks_from_the_input():
    with pytest.raises(PlanError, match="do not split into 2 chunks"):
        message_layout(ExecutionPlan.from_plan(_input_only(2)), 0, 40, 0, 4)
    lay = message_layout(ExecutionPlan.from_plan(_input_only(2)), 0, 64, 0, 4)
    assert (lay.chunk, len(lay.in_slots()), lay.out_slots()) == (32, 2, [])


@pytest.fixture(scope="module")
def pool():
    ranks = RankPool(3, env={"PYMSCCLPP_TIMEOUT_S": "60"})
    yield ranks
    ranks.close()


@pytest.mark.parametrize("program, count", [(scratch_exchange, 0), (sendrecv_ring, 20), (allgather_forward_packets, 12),
                                            (rank0_only, 16)])
def test_program_runs_through_the_executor_as_the_interpreter_does(pool, program, count):
    xplan = ExecutionPlan.from_plan(program(3))
    inputs = oracle.make_inputs(xplan, "float32", count, 1, 2)
    expected = oracle.expected_outputs(xplan, inputs, count, "sum")
    path = cases.write_case(os.path.join(tempfile.mkdtemp(), "case.pkl"), xplan.plan.to_json(), inputs, expected)
    pool.run(cases.run_case, path=path)
