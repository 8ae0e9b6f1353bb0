"""Features MSCCL++'s DSL tests use, on our own programs: switch (NVLS) channels end to end (DSL, plan
format, interpreter, executor refusal), SendRecv, MSCCL++'s signal/wait pairing rule, zero-chunk plans."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from language.parity_programs import allgather_forward_packets, nvls_allgather_packets, nvls_allreduce, scratch_exchange, sendrecv_ring
from pymscclpp.executor import ExecutionPlan
from pymscclpp.language.channel import MemoryChannel, SwitchChannel
from pymscclpp.language.collectives import TestCollective
from pymscclpp.language.errors import DSLError
from pymscclpp.language.general import JSON
from pymscclpp.language.internal.types import BufferType
from pymscclpp.language.interpreter import DeadlockError, RaceError, check_plan, run_plan
from pymscclpp.language.program import CollectiveProgram
from pymscclpp.language.rank import Buffer, Rank
from pymscclpp.plan import PlanError, load_plan


def _ops(plan: dict, rank: int, tb: int = 0) -> list[dict]:
    return plan["gpus"][rank]["threadblocks"][tb]["ops"]


def test_switch_load_reduce_then_store_fuses_into_one_multimem_op():
    plan = nvls_allreduce(3)
    glres = next(op for op in _ops(plan, 1) if op["name"] == "glres")
    assert glres["src_buff"] == [{"switch_channel_id": 0, "index": 1, "size": 1}] == glres["dst_buff"]
    assert plan["gpus"][1]["channels"][-1] == {"channel_type": "switch", "buffer_type": "i",
                                               "rank_groups": [{"size": 3, "ranks": [0, 1, 2]}]}


def test_unfused_switch_ops_use_mscclpp_shapes_and_round_trip():
    plan = nvls_allreduce(2, instr_fusion=False)
    glre = next(op for op in _ops(plan, 0) if op["name"] == "glre")
    assert glre == {"name": "glre", "buffer_type": "i", "buffer_offset": 0, "size": 1,
                    "dst_chunk": {"rank": 0, "type": "i", "index": 0, "size": 1}, "channel_ids": [0],
                    "channel_type": "switch", "reduce_op": "sum"}
    gstore = next(op for op in _ops(plan, 0) if op["name"] == "gstore")
    assert gstore["src_buff"] == [{"rank": 0, "type": "i", "index": 0, "size": 1}]
    assert gstore["dst_buff"] == [{"switch_channel_id": 0, "index": 0, "size": 1}]
    assert load_plan(plan).to_dict() == plan


@pytest.mark.parametrize("fused", [True, False])
def test_interpreter_runs_multimem_reduce_and_store_as_an_allreduce(fused):
    report = check_plan(nvls_allreduce(3, instr_fusion=fused), dtype="int32")
    assert report.checked and report.collective == "allreduce"


def test_interpreter_runs_multimem_packet_broadcast_as_an_allgather():
    assert check_plan(nvls_allgather_packets(3), dtype="float16").checked


def test_multimem_store_without_a_final_handshake_is_a_race():
    with pytest.raises(RaceError, match="glres"):
        check_plan(nvls_allreduce(2, handshake_after=False))


def test_executor_refuses_switch_channels_naming_nvls():
    with pytest.raises(PlanError, match="switch channels need NVLS multicast memory"):
        ExecutionPlan.from_plan(nvls_allreduce(2))


@pytest.mark.parametrize("edit, words", [
    (lambda d: d["gpus"][0]["channels"][-1]["rank_groups"][0].update(ranks=[1, 2], size=2), "does not include it"),
    (lambda d: d["gpus"][0]["channels"][-1]["rank_groups"][0].update(size=7), "size 7 must count"),
    (lambda d: next(op for op in d["gpus"][0]["threadblocks"][0]["ops"] if op["name"] == "glres")["src_buff"][0]
     .update(index=3), "exceed the 3 'i' chunks of rank 0 in the switch channel's group"),
    (lambda d: next(op for op in d["gpus"][0]["threadblocks"][0]["ops"] if op["name"] == "glres")["src_buff"][0]
     .update(switch_channel_id=4), "has 1 switch channels, no channel 4"),
    (lambda d: next(op for op in d["gpus"][0]["threadblocks"][0]["ops"] if op["name"] == "glres").update(
        dst_buff=[{"type": "o", "index": 0, "size": 1}]), "expects a switch channel's buffer"),
])
def test_invalid_switch_fields_are_named(edit, words):
    plan = copy.deepcopy(nvls_allreduce(3))
    edit(plan)
    with pytest.raises(PlanError, match=words):
        load_plan(plan)


def test_switch_channel_checks_its_arguments():
    with CollectiveProgram("p", TestCollective(3, 1, 1), 3):
        with pytest.raises(DSLError, match="not in this switch channel's group"):
            SwitchChannel([0, 1], BufferType.input).at_rank(2)
        ch = SwitchChannel([0, 1], BufferType.input)
        with pytest.raises(DSLError, match="exceed the 1 chunks"):
            ch.at_rank(0).reduce(1, 1, Rank(0).get_output_buffer()[0:1], tb=0)
        with pytest.raises(DSLError, match="must be on rank 0"):
            ch.at_rank(0).broadcast(Rank(1).get_input_buffer()[0:1], 0, 1, tb=0)
        with pytest.raises(DSLError, match="live in scratch"):
            ch.at_rank(0).broadcast_packets(Buffer(0, 1)[0:1], 0, 1, tb=0)


def test_sendrecv_moves_each_input_to_the_next_rank():
    xs = [np.full(4, r + 1, np.float32) for r in range(3)]
    for port in (False, True):
        out = run_plan(sendrecv_ring(3, port=port), xs)[0]
        assert [float(o[0]) for o in out] == [3.0, 1.0, 2.0]


def test_pairing_counts_signals_per_peer_and_channel_type_as_mscclpp_does():
    # two ranks: each rank's "next" and "prev" channels lead to the same peer, created in the same order,
    # so rank 0's signal on its prev channel reaches rank 1's prev channel while rank 1 waits on next
    plan = sendrecv_ring(2)  # balanced per peer: MSCCL++'s rule accepts it
    with pytest.raises(DeadlockError):
        check_plan(plan)
    with CollectiveProgram("p", TestCollective(2, 1, 1), 2) as prog:
        a, _ = MemoryChannel(1, 0), MemoryChannel(1, 0)
        b, d = MemoryChannel(0, 1), MemoryChannel(0, 1)
        a.signal(tb=0)
        d.wait(tb=0)  # a pairs with b, not d: the strict lint names the hang
        prog.to_dict()
        with pytest.raises(DSLError, match="signal number 1 on memory channel 0 to rank 1 is never waited for"):
            prog.to_dict(strict_pairing=True)


def test_unbalanced_signals_per_peer_are_rejected():
    with CollectiveProgram("p", TestCollective(2, 1, 1), 2):
        a, b = MemoryChannel(1, 0), MemoryChannel(0, 1)
        a.signal(tb=0)
        a.signal(tb=1)
        b.wait(tb=0)
        with pytest.raises(DSLError, match=r"rank 0 tb 1 op 'signal'.*signal number 2 to rank 1 on memory channels"):
            JSON()


def test_plan_without_input_or_output_chunks_loads_and_interprets():
    plan = scratch_exchange(3)
    assert {(g["input_chunks"], g["output_chunks"]) for g in plan["gpus"]} == {(0, 0)}
    report = check_plan(plan, size=64)
    assert not report.checked and report.message_bytes == 0
    assert run_plan(plan, [np.zeros(0, np.float32)] * 3, chunk_bytes=16)[0][0].size == 0


def test_packet_forwards_from_one_chunk_fuse_into_one_multi_destination_op():
    fused = allgather_forward_packets(3)
    rppkt = [op for op in _ops(fused, 0) if op["name"] == "rppkt"]
    assert len(rppkt) == 1 and len(rppkt[0]["dst_buff"]) == 2
    for plan in (fused, allgather_forward_packets(3, instr_fusion=False)):
        assert check_plan(plan, dtype="int32").checked
