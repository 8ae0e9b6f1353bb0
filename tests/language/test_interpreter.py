"""The reference interpreter: op semantics, races, deadlocks and cross-execution hazards, named by rank/tb/op."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from pymscclpp.language.channel import MemoryChannel, PortChannel
from pymscclpp.language.collectives import TestCollective
from pymscclpp.language.general import JSON
from pymscclpp.language.internal.types import ReduceOperationType
from pymscclpp.language.interpreter import (CollectiveMismatchError, DeadlockError, InterpreterError, RaceError,
                                            check_plan, expected_outputs, run_plan)
from pymscclpp.language.interpreter.machine import split_offset
from pymscclpp.language.program import CollectiveProgram
from pymscclpp.language.programs import allgather, allreduce_allpairs, reducescatter
from pymscclpp.language.rank import Buffer, Rank

from .conftest import names, without_op


def _first(plan: dict, rank: int, tb: int, name: str) -> int:
    return names(plan, rank, tb).index(name)


def test_outputs_match_numpy_for_explicit_inputs():
    plan = allreduce_allpairs(3)
    xs = [np.arange(12, dtype=np.int32) * (r + 1) for r in range(3)]
    (outs,) = run_plan(plan, xs)
    for out in outs:
        assert np.array_equal(out, xs[0] + xs[1] + xs[2])


def test_results_do_not_depend_on_the_schedule():
    plan = reducescatter(4, protocol="packet", chunk_factor=2)
    xs = [np.random.default_rng(r).integers(-5, 5, 32).astype(np.float32) for r in range(4)]
    runs = [run_plan(plan, xs, seed=seed)[0] for seed in range(5)]
    for outs in runs[1:]:
        assert all(np.array_equal(a, b) for a, b in zip(outs, runs[0]))


def test_several_executions_each_get_their_own_inputs():
    plan = allgather(2, inplace=True)
    runs = [[np.full(4, 10 * k + r, np.float32) for r in range(2)] for k in range(3)]
    outs = run_plan(plan, runs)
    for k in range(3):
        assert np.array_equal(outs[k][1], np.concatenate(runs[k]))


def test_missing_wait_is_a_race_naming_both_ops():
    plan = allreduce_allpairs(2)
    waits = [i for i, n in enumerate(names(plan, 1, 0)) if n == "wait"]
    with pytest.raises(RaceError) as info:
        check_plan(without_op(plan, 1, 0, waits[1]))
    message = str(info.value)
    assert "race on rank 1 scratch chunk 0" in message
    assert "rank 1 tb 0 ops[" in message and "(res) reads it" in message
    assert "rank 0 tb 0 ops[" in message and "(put) wrote it" in message


def test_missing_final_wait_races_with_the_host_reading_the_output():
    plan = allgather(2)
    last = len(names(plan, 1, 0)) - 1
    assert names(plan, 1, 0)[last] == "wait"
    with pytest.raises(RaceError, match=r"the host reading rank 1's output after execution 1.*\(put\) wrote it"):
        check_plan(without_op(plan, 1, 0, last))


def test_missing_handshake_races_across_executions():
    plan = allgather(2)
    # rank 0 stops waiting for rank 1's "ready" signal (and rank 1 stops sending it)
    plan = without_op(without_op(plan, 1, 0, _first(plan, 1, 0, "signal")), 0, 0, _first(plan, 0, 0, "wait"))
    check_plan(plan, executions=1)  # a single run is fine
    with pytest.raises(RaceError, match=r"rank 1 output chunk 0: rank 0 tb 0 ops\[\d\] \(put\) writes it in execution 2, "
                                        r"but the host reading rank 1's output after execution 1 read it"):
        check_plan(plan)


def test_ll_allgather_needs_its_double_scratch_buffer():
    plan = allgather(3, protocol="packet")
    check_plan(plan)
    single = dict(plan, use_double_scratch_buffer=False)
    with pytest.raises(RaceError, match=r"scratch chunk \d: rank \d tb 0 ops\[\d\] \(ppkt\) writes it in execution 2"):
        check_plan(single)


def test_unsent_signal_is_a_deadlock_naming_the_wait():
    plan = allreduce_allpairs(2)
    with pytest.raises(DeadlockError) as info:
        check_plan(without_op(plan, 0, 0, _first(plan, 0, 0, "signal")))
    assert "rank 1 tb 0 ops[" in str(info.value) and "waits for signal number" in str(info.value)


def test_packets_that_never_arrive_are_a_deadlock():
    plan = allgather(2, protocol="packet")
    with pytest.raises(DeadlockError, match=r"rank 1 tb 0 ops\[\d\] \(upkt\), execution 1: waits for LL packets"):
        run_plan(without_op(plan, 0, 0, _first(plan, 0, 0, "ppkt")), [np.ones(4, np.float32)] * 2)


def test_barrier_waiting_for_more_thread_blocks_than_arrive_is_a_deadlock():
    with CollectiveProgram("b", TestCollective(1, 1, 1), 1):
        Rank(0).barrier([0, 1])
        plan = json.loads(JSON())
    plan["gpus"][0]["threadblocks"][0]["ops"][0]["num_threadblocks"] = 2
    plan["gpus"][0]["threadblocks"][1]["ops"] = []
    with pytest.raises(DeadlockError, match="barrier 0 needs 2 thread blocks, 1 arrived"):
        run_plan(plan, [np.zeros(4, np.float32)])


def test_unsynchronized_thread_blocks_of_a_rank_race():
    with CollectiveProgram("tbs", TestCollective(1, 1, 1), 1):
        r = Rank(0)
        s = Buffer(0, 1)
        r.copy(s[0:1], r.get_input_buffer()[0:1], tb=0)
        r.copy(r.get_output_buffer()[0:1], s[0:1], tb=1)
        plan = json.loads(JSON())
    with pytest.raises(RaceError, match=r"rank 0 scratch chunk 0: rank 0 tb \d ops\[0\] \(copy\)"):
        run_plan(plan, [np.zeros(4, np.float32)])


def test_port_put_source_must_be_flushed_before_it_is_overwritten():
    def program(flush: bool) -> dict:
        with CollectiveProgram("port", TestCollective(2, 1, 1), 2):
            ch, back = PortChannel(1, 0), PortChannel(0, 1)
            r0 = Rank(0)
            ch.put_with_signal(Rank(1).get_output_buffer()[0:1], r0.get_input_buffer()[0:1], tb=0)
            back.wait(tb=0)
            if flush:
                ch.flush(tb=0)
            r0.copy(r0.get_input_buffer()[0:1], r0.get_output_buffer()[0:1], tb=0)
            return json.loads(JSON())

    xs = [np.arange(4, dtype=np.float32), np.zeros(4, np.float32)]
    assert np.array_equal(run_plan(program(True), xs)[0][1], xs[0])
    with pytest.raises(RaceError, match=r"\(copy\) writes it.*\(pws\) through its port channel's proxy read it"):
        run_plan(program(False), xs)


@pytest.mark.parametrize("op, fn", [(ReduceOperationType.sum, np.add), (ReduceOperationType.min, np.minimum),
                                    (ReduceOperationType.max, np.maximum)])
def test_reduce_applies_its_reduce_op(op, fn):
    with CollectiveProgram("re", TestCollective(1, 3, 1), 1):
        r = Rank(0)
        i = r.get_input_buffer()
        r.reduce(i[0:1], [i[1:2], i[2:3]], tb=0, dst_chunk=r.get_output_buffer()[0:1], reduce_op=op)
        plan = json.loads(JSON())
    assert plan["gpus"][0]["threadblocks"][0]["ops"][0]["reduce_op"] == op.value
    x = np.random.default_rng(0).integers(-50, 50, 12).astype(np.int32)
    assert np.array_equal(run_plan(plan, [x])[0][0], fn(fn(x[:4], x[4:8]), x[8:]))


@pytest.mark.parametrize("dtype", ["float16", "float32", "int32"])
def test_check_plan_supports_each_dtype(dtype):
    report = check_plan(allreduce_allpairs(3, protocol="packet"), dtype=dtype, seed=3)
    assert report.dtype == dtype and report.checked


def test_bfloat16_needs_ml_dtypes():
    try:
        import ml_dtypes  # noqa: F401
    except ImportError:
        with pytest.raises(InterpreterError, match="ml_dtypes"):
            check_plan(allgather(2), dtype="bfloat16")
    else:
        assert check_plan(allgather(2), dtype="bfloat16").checked


def test_wrong_result_is_a_collective_mismatch():
    plan = allgather(2)
    plan["collective"] = "allreduce"
    plan["gpus"] = [dict(g, input_chunks=2) for g in plan["gpus"]]
    with pytest.raises(CollectiveMismatchError, match=r"execution 1: rank 0 output chunk 0 .* allreduce expects"):
        check_plan(plan)


def test_custom_collectives_are_run_but_not_compared():
    with CollectiveProgram("c", TestCollective(1, 1, 1), 1):
        Rank(0).copy(Rank(0).get_output_buffer()[0:1], Rank(0).get_input_buffer()[0:1], tb=0)
        report = check_plan(JSON())
    assert not report.checked and "no reference" in str(report)


def test_thread_block_group_split_matches_the_executor():
    # 5 alignment units over 2 thread blocks: the first gets the extra unit
    assert [split_offset(80, i, 2, 16) for i in range(3)] == [0, 48, 80]
    assert [split_offset(64, i, 3, 16) for i in range(4)] == [0, 32, 48, 64]


def test_expected_outputs_of_each_collective():
    xs = [np.array([1, 2, 3, 4]), np.array([10, 20, 30, 40])]
    assert [o.tolist() for o in expected_outputs("allreduce", xs)] == [[11, 22, 33, 44]] * 2
    assert [o.tolist() for o in expected_outputs("reducescatter", xs)] == [[11, 22], [33, 44]]
    assert [o.tolist() for o in expected_outputs("allgather", xs)] == [[1, 2, 3, 4, 10, 20, 30, 40]] * 2
    assert [o.tolist() for o in expected_outputs("alltoall", xs)] == [[1, 2, 10, 20], [3, 4, 30, 40]]
    assert expected_outputs("broadcast", xs) is None


def test_message_size_must_fit_the_plan():
    plan = allgather(2)
    with pytest.raises(InterpreterError, match="not a multiple"):
        check_plan(plan, size=40)
    limited = dict(plan, max_message_size=64)
    with pytest.raises(InterpreterError, match="outside the plan's range"):
        check_plan(limited, size=128)
    assert check_plan(dict(plan, min_message_size=4096)).message_bytes >= 4096


def test_run_plan_checks_its_inputs():
    plan = allgather(2)
    with pytest.raises(InterpreterError, match="2 ranks, got inputs for 1"):
        run_plan(plan, [np.zeros(4, np.float32)])
    with pytest.raises(InterpreterError, match="not a multiple of the plan's buffer_alignment"):
        run_plan(plan, [np.zeros(3, np.float32)] * 2)


def test_mscclpp_v08_relaxed_handshake_is_accepted():
    from pymscclpp.language.channel import SyncType
    with CollectiveProgram("rlx", TestCollective(2, 1, 1), 2):
        ch, back = MemoryChannel(1, 0), MemoryChannel(0, 1)
        back.signal(tb=0, relaxed=True)
        ch.wait(tb=0, relaxed=True, data_sync=SyncType.after)
        ch.put(Rank(1).get_output_buffer()[0:1], Rank(0).get_input_buffer()[0:1], tb=0)
        ch.signal(tb=0)
        back.wait(tb=0)
        plan = json.loads(JSON())
    assert "rlxsignal" in names(plan, 1, 0) and "rlxwait" in names(plan, 0, 0)
    runs = [[np.full(4, k, np.float32), np.zeros(4, np.float32)] for k in range(2)]
    outs = run_plan(plan, runs)
    assert np.array_equal(outs[1][1], runs[1][0])
    # a relaxed signal does not publish data written in its own kernel
    bad = copy.deepcopy(plan)
    final = next(op for op in bad["gpus"][0]["threadblocks"][0]["ops"] if op["name"] == "signal")
    final["name"] = "rlxsignal"
    with pytest.raises(RaceError, match="host reading rank 1's output"):
        run_plan(bad, runs)
