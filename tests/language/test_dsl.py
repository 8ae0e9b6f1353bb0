"""The DSL: MSCCL++-shaped API, compiler passes (pairing check, fusion, auto sync, replication) and emitted plans."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pymscclpp.language.channel import MemoryChannel, PortChannel, SyncType, ThreadBlockGroup
from pymscclpp.language.collectives import AllGather, AllReduce, TestCollective
from pymscclpp.language.errors import DSLError
from pymscclpp.language.general import JSON
from pymscclpp.language.interpreter import RaceError, check_plan, run_plan
from pymscclpp.language.loop import LoopIterationContext
from pymscclpp.plan import load_plan
from pymscclpp.language.program import CollectiveProgram
from pymscclpp.language.rank import Buffer, Rank, Semaphore

from .conftest import names, ops_of


def _send_recv_program(**program_args) -> dict:
    """Rank 0 copies input chunk 0 to chunk 1, then puts chunk 1 into rank 1's output."""
    with CollectiveProgram("sendrecv", TestCollective(2, 2, 1), 2, **program_args):
        to1, to0 = MemoryChannel(1, 0), MemoryChannel(0, 1)
        inp = Rank(0).get_input_buffer()
        to0.signal(tb=0)
        to1.wait(tb=0)
        Rank(0).copy(inp[1:2], inp[0:1], tb=0)
        to1.put(Rank(1).get_output_buffer()[0:1], inp[1:2], tb=0)
        to1.signal(tb=0)
        to0.wait(tb=0)
        return json.loads(JSON())


def test_mscclpp_style_ll_allreduce_runs_with_only_the_import_changed():
    # an in-place LL allreduce written against the MSCCL++ v0.8 API: star imports, explicit thread blocks
    from pymscclpp.language.channel import MemoryChannel as MC
    from pymscclpp.language.rank import Buffer as Buf, Rank as Rk
    n = 3
    with CollectiveProgram("ll_ar", AllReduce(n, n, True), n, protocol="LL", auto_sync=False,
                           use_double_scratch_buffer=True, num_threads_per_block=512):
        scratch = [Buf(r, 2 * (n - 1) * n) for r in range(n)]
        chans = {(p, r): MC(p, r) for r in range(n) for p in range(n) if p != r}
        for r in range(n):
            inp = Rk(r).get_input_buffer()
            for p in range(n):
                if p != r:
                    at = (r if r < p else r - 1) * n
                    chans[(p, r)].put_packets(scratch[p][at:at + n], inp[p * n:p * n + n], tb=p if p < r else p - 1)
        for r in range(n):
            inp = Rk(r).get_input_buffer()
            for i in range(n):
                parts = [scratch[r][(p if p < r else p - 1) * n + i:(p if p < r else p - 1) * n + i + 1]
                         for p in range(n) if p != r]
                Rk(r).reduce(inp[r * n + i:r * n + i + 1], parts, i, packet=True)
                for p in range(n):
                    if p != r:
                        at = n * (n - 1) + (r if r < p else r - 1) * n + i
                        chans[(p, r)].put_packets(scratch[p][at:at + 1], inp[r * n + i:r * n + i + 1], i)
        for r in range(n):
            inp = Rk(r).get_input_buffer()
            for p in range(n):
                if p != r:
                    at = n * (n - 1) + (p if p < r else p - 1) * n
                    Rk(r).unpack_packets(inp[p * n:p * n + n], scratch[r][at:at + n], p if p < r else p - 1)
        text = JSON()
    plan = json.loads(text)
    assert plan["num_threads_per_block"] == 512 and plan["use_double_scratch_buffer"] is True
    assert "respkt" in names(plan, 0, 0)  # reduce + put_packets fused
    report = check_plan(text, dtype="float16")
    assert report.checked and report.collective == "allreduce"


def test_json_is_repeatable_and_leaves_the_program_unchanged():
    with CollectiveProgram("p", TestCollective(2, 1, 1), 2) as prog:
        MemoryChannel(1, 0).signal(tb=0)
        MemoryChannel(0, 1).wait(tb=0)
        assert JSON() == JSON() == prog.to_json()


def test_calls_outside_a_program_fail_clearly():
    with pytest.raises(RuntimeError, match="no active CollectiveProgram"):
        Rank(0)


def test_unmatched_wait_is_reported_at_the_op_and_its_source_line():
    with CollectiveProgram("p", TestCollective(2, 1, 1), 2):
        MemoryChannel(1, 0).signal(tb=0)
        back = MemoryChannel(0, 1)
        back.wait(tb=0)
        back.wait(tb=3)  # nobody signals twice
        with pytest.raises(DSLError) as info:
            JSON()
    message = str(info.value)
    assert "rank 1 tb 3 op 'wait'" in message and "test_dsl.py:" in message
    assert "can never be satisfied" in message


def test_unwaited_signal_is_reported():
    with CollectiveProgram("p", TestCollective(2, 1, 1), 2):
        MemoryChannel(1, 0).signal(tb=2)
        MemoryChannel(0, 1)
        with pytest.raises(DSLError, match=r"rank 0 tb 2 op 'signal'.*never waited for"):
            JSON()


def test_signal_without_a_channel_back_is_reported():
    with CollectiveProgram("p", TestCollective(2, 1, 1), 2):
        PortChannel(1, 0).signal(tb=0)
        with pytest.raises(DSLError, match=r"no port channel back to rank 0.*PortChannel\(0, 1\)"):
            JSON()


def test_multi_peer_signals_and_waits_fuse_into_one_op_each():
    plan = _allpairs_handshake(instr_fusion=True)
    assert names(plan, 0, 0) == ["signal", "nop", "wait"]
    assert ops_of(plan, 0, 0)[0]["channel_ids"] == [0, 1, 2]


def test_without_fusion_each_signal_keeps_its_own_op():
    plan = _allpairs_handshake(instr_fusion=False)
    assert names(plan, 0, 0).count("signal") == 3 and names(plan, 0, 0).count("wait") == 3


def _allpairs_handshake(instr_fusion: bool) -> dict:
    with CollectiveProgram("hs", TestCollective(4, 1, 1), 4, instr_fusion=instr_fusion):
        ch = {(r, p): MemoryChannel(p, r) for r in range(4) for p in range(4) if p != r}
        for r in range(4):
            for p in range(4):
                if p != r:
                    ch[r, p].signal(tb=0)
            for p in range(4):
                if p != r:
                    ch[r, p].wait(tb=0)
        return json.loads(JSON())


def test_reduce_then_put_of_the_result_fuses_into_reduce_send():
    from pymscclpp.language.programs import allreduce_allpairs
    fused = allreduce_allpairs(3)
    assert "res" in names(fused, 1, 0) and "re" not in names(fused, 1, 0)
    res = next(op for op in ops_of(fused, 1, 0) if op["name"] == "res")
    assert [("type" in b) for b in res["dst_buff"]] == [True, False, False]  # local result, then two peers
    unfused = allreduce_allpairs(3, instr_fusion=False)
    assert "re" in names(unfused, 1, 0) and "res" not in names(unfused, 1, 0)


def test_accumulating_read_reduces_merge_their_remote_sources():
    from pymscclpp.language.programs import allreduce_rsag
    plan = allreduce_rsag(4)
    rres = [op for op in ops_of(plan, 0, 0) if op["name"] == "rres"]
    assert len(rres) == 1 and len(rres[0]["src_buff"]) == 4 and len(rres[0]["dst_buff"]) == 4


def test_packet_reduce_fuses_with_copy_packets_and_put_packets():
    with CollectiveProgram("pk", TestCollective(2, 2, 2), 2, protocol="LL"):
        s0, s1 = Buffer(0, 3), Buffer(1, 1)
        ch = MemoryChannel(1, 0)
        MemoryChannel(0, 1)
        r0 = Rank(0)
        out = r0.get_output_buffer()
        r0.reduce(r0.get_input_buffer()[0:1], [s0[0:1]], tb=0, dst_chunk=out[0:1], packet=True)
        r0.copy_packets(s0[1:2], out[0:1], tb=0)
        ch.put_packets(s1[0:1], out[0:1], tb=0)
        plan = json.loads(JSON())
    assert names(plan, 0, 0) == ["recspkt"]
    op = ops_of(plan, 0, 0)[0]
    assert [b.get("type", "remote") for b in op["dst_buff"]] == ["o", "s", "remote"]


def test_auto_sync_inserts_a_barrier_between_dependent_ops_of_a_thread_block():
    plan = _send_recv_program(instr_fusion=False)
    ops = names(plan, 0, 0)
    assert ops[ops.index("copy") + 1] == "nop" and ops[ops.index("copy") + 2] == "put"
    out = run_plan(plan, [np.arange(8, dtype=np.float32), np.zeros(8, np.float32)], chunk_bytes=16)
    assert np.array_equal(out[0][1], np.arange(4, dtype=np.float32))


def test_without_auto_sync_the_interpreter_reports_the_missing_barrier():
    plan = _send_recv_program(instr_fusion=False, auto_sync=False)
    ops = names(plan, 0, 0)
    assert ops[ops.index("copy") + 1] == "put"
    with pytest.raises(RaceError, match=r"rank 0 input chunk 1: rank 0 tb 0 ops\[\d\] \(put\) reads it.*\(copy\) wrote"):
        run_plan(plan, [np.arange(8, dtype=np.float32), np.zeros(8, np.float32)], chunk_bytes=16)


def test_instances_replicate_thread_blocks_channels_and_chunks():
    from pymscclpp.language.programs import allgather
    one, two = allgather(2), allgather(2, instances=2)
    g1, g2 = one["gpus"][0], two["gpus"][0]
    assert len(g2["threadblocks"]) == 2 * len(g1["threadblocks"])
    assert (g2["input_chunks"], g2["output_chunks"]) == (2 * g1["input_chunks"], 2 * g1["output_chunks"])
    assert g2["channels"][0]["connected_to"] == [1, 1]
    puts = [next(op for op in tb["ops"] if op["name"] == "put") for tb in g2["threadblocks"]]
    assert [p["dst_buff"][0]["index"] for p in puts] == [0, 1]  # output chunk 0 of rank 1, split between instances
    assert [tb["channels"][0]["channel_ids"] for tb in g2["threadblocks"]] == [[0], [1]]


def test_thread_block_group_splits_one_op_across_thread_blocks():
    with CollectiveProgram("tbg", AllGather(2, 1, True), 2):
        for s in range(2):
            d = 1 - s
            ch = MemoryChannel(d, s)
            group = ThreadBlockGroup([0, 1, 2])
            ch.signal(tb=0)
            ch.wait(tb=0, data_sync=SyncType.after)
            Rank(s).barrier(tb_list=group.tb_list)
            ch.put(Rank(d).get_output_buffer()[s:s + 1], Rank(s).get_output_buffer()[s:s + 1], tb_group=group)
            Rank(s).barrier(tb_list=group.tb_list)
            ch.signal(tb=0, data_sync=SyncType.before)
            ch.wait(tb=0, data_sync=SyncType.after)
        plan = json.loads(JSON())
    puts = [next(op for op in tb["ops"] if op["name"] == "put") for tb in plan["gpus"][0]["threadblocks"]]
    assert [p["tbg_info"] for p in puts] == [{"tb_id": i, "tbg_size": 3} for i in range(3)]
    barrier = next(op for op in ops_of(plan, 0, 1) if op["name"] == "barrier")
    assert barrier == {"name": "barrier", "barrier_id": 0, "num_threadblocks": 3}
    assert check_plan(plan, size=2 * 3 * 32).checked  # 3 slices of 32 bytes per chunk


def test_single_thread_block_barrier_is_a_syncthreads():
    with CollectiveProgram("b", TestCollective(1, 2, 2), 1):
        r = Rank(0)
        r.copy(r.get_output_buffer()[0:1], r.get_input_buffer()[0:1], tb=0)
        r.barrier(tb_list=[0])
        r.copy(r.get_output_buffer()[1:2], r.get_input_buffer()[1:2], tb=0)
        assert names(json.loads(JSON()), 0, 0) == ["copy", "nop", "copy"]


def test_loop_context_groups_ops_into_a_pipeline_op():
    with CollectiveProgram("loop", TestCollective(1, 2, 2), 1):
        r = Rank(0)
        with LoopIterationContext(unit=32, num_chunks=2):
            r.copy(r.get_output_buffer()[0:2], r.get_input_buffer()[0:2], tb=0)
        plan = json.loads(JSON())
    (op,) = ops_of(plan, 0, 0)
    assert op["name"] == "pipeline" and op["iter_context"] == {"unit_size": 32, "num_chunks": 2}
    assert [inner["name"] for inner in op["ops"]] == ["copy"]
    x = np.arange(32, dtype=np.float32)
    assert np.array_equal(run_plan(plan, [x])[0][0], x)  # 4 passes of 32 bytes over 2 chunks of 64


def test_semaphores_order_thread_blocks_of_a_rank():
    with CollectiveProgram("sem", TestCollective(1, 1, 1), 1):
        r = Rank(0)
        sem = Semaphore(0, initial_value=0)
        s = Buffer(0, 1)
        r.copy(s[0:1], r.get_input_buffer()[0:1], tb=0)
        sem.release(tb=0)
        sem.acquire(tb=1)
        r.copy(r.get_output_buffer()[0:1], s[0:1], tb=1)
        plan = json.loads(JSON())
    assert plan["gpus"][0]["semaphores"] == [{"init_value": 0}]
    assert names(plan, 0, 0) == ["copy", "nop", "sem_release"] and names(plan, 0, 1) == ["sem_acquire", "nop", "copy"]
    x = np.arange(16, dtype=np.int32)
    assert np.array_equal(run_plan(plan, [x])[0][0], x)


def test_port_channel_put_with_signal_names_its_channel():
    with CollectiveProgram("port", TestCollective(2, 1, 1), 2):
        ch, back = PortChannel(1, 0), PortChannel(0, 1)
        ch.put_with_signal_and_flush(Rank(1).get_output_buffer()[0:1], Rank(0).get_input_buffer()[0:1], tb=0)
        back.wait(tb=0)
        plan = json.loads(JSON())
    op = ops_of(plan, 0, 0)[0]
    assert op == {"name": "pwsf", "src_buff": [{"type": "i", "index": 0, "size": 1}],
                  "dst_buff": [{"buffer_id": 0, "index": 0, "size": 1}], "channel_ids": [0], "channel_type": "port"}
    assert plan["gpus"][0]["remote_buffers"] == [{"rank": 1, "type": "o", "access_channel_types": ["port"]}]
    load_plan(plan)


@pytest.mark.parametrize("build, words", [
    (lambda: MemoryChannel(1, 0).put(Rank(0).get_output_buffer()[0:1], Rank(0).get_input_buffer()[0:1], tb=0),
     "destination rank 1"),
    (lambda: Rank(0).copy(Rank(0).get_output_buffer()[0:1], Rank(0).get_input_buffer()[0:2], tb=0), "sizes differ"),
    (lambda: Rank(0).get_input_buffer()[0:3], "out of bounds"),
    (lambda: Rank(5), "rank 5 is out of bounds"),
    (lambda: MemoryChannel(1, 1), "two different ranks"),
    (lambda: Rank(0).unpack_packets(Rank(0).get_output_buffer()[0:1], Rank(0).get_input_buffer()[0:1], tb=0), "scratch"),
    (lambda: Rank(0).copy(Rank(0).get_output_buffer()[0:1], Rank(0).get_input_buffer()[0:1]), "either 'tb'"),
])
def test_bad_dsl_calls_are_rejected_when_made(build, words):
    with CollectiveProgram("bad", TestCollective(2, 2, 2), 2):
        with pytest.raises(RuntimeError, match=words):
            build()


def test_scratch_buffers_are_allocated_one_after_another():
    with CollectiveProgram("s", TestCollective(2, 1, 1), 2):
        a, b = Buffer(0, 2), Buffer(0, 3)
        assert (a[0:1].index, b[0:1].index, b[2:3].index) == (0, 2, 4)
        plan = json.loads(JSON())
    assert plan["gpus"][0]["scratch_chunks"] == 5 and plan["gpus"][1]["scratch_chunks"] == 0
