"""Bad inputs to every public call: each raises an error whose text says what is wrong, and no output byte changes.

Known gaps are strict xfails (they start passing, and fail as XPASS, once fixed): see docs/reliability.md.
"""

from __future__ import annotations

import copy
import json
import math

import pytest

from fault import cases
from fault.conftest import pool
from pymscclpp.errors import (BackendError, CommTimeoutError, InvalidUsageError, PymscclppError,
                              RegistrationError)

# ---------------------------------------------------------------- collectives (2 rank processes)

ALL_REDUCE = {  # case: (error type, words the message must contain)
    "recv_too_small": (InvalidUsageError, "receive buffer has 15 elements, expected 16"),
    "recv_too_large": (InvalidUsageError, "receive buffer has 17 elements, expected 16"),
    "dtype_mismatch": (InvalidUsageError, "send buffer is float32 but receive buffer is int32"),
    "host_send": (InvalidUsageError, "host memory"),
    "host_recv": (InvalidUsageError, "host memory"),
    "list_send": (InvalidUsageError, "expected a device array, got list"),
    "none_send": (InvalidUsageError, "expected a device array, got NoneType"),
    "unknown_op": (InvalidUsageError, "unknown reduction op 'xor'"),
    "op_not_a_string": (InvalidUsageError, "unknown reduction op 3"),
    "unsupported_dtype": (InvalidUsageError, "cannot reduce dtype complex64"),
    "bool_dtype": (InvalidUsageError, "cannot reduce dtype bool"),
    "non_contiguous": (InvalidUsageError, "is not contiguous"),
    "unknown_algo": (InvalidUsageError, "unknown all_reduce algorithm 'ring9000'"),
    "bad_stream": (InvalidUsageError, "cannot use str as a CUDA stream"),
}
GAPS: dict = {}


def _check(out: dict, error: type, words: str) -> None:
    assert out["kind"] is not None, "no error was raised"
    assert error.__name__ in out["kind"], out  # that error type or a subclass of it
    assert words in out["text"], out
    assert out["unchanged"], "a rejected call changed buffer contents"


def _gap(case: str):
    return [pytest.mark.xfail(strict=True, reason=GAPS[case])] if case in GAPS else []


@pytest.mark.parametrize("case", [pytest.param(c, marks=_gap(c)) for c in ALL_REDUCE])
def test_bad_all_reduce_argument_raises_naming_it_and_writes_nothing(case):
    for out in pool().run(cases.bad_all_reduce, case=case):
        _check(out, *ALL_REDUCE[case])


OTHER = {"host_send": "host memory", "host_recv": "host memory", "dtype_mismatch": "int32",
         "recv_wrong_size": "receive buffer", "bad_root": "root"}


@pytest.mark.parametrize("case", list(OTHER))
@pytest.mark.parametrize("name", list(cases.COLLECTIVES))
def test_bad_argument_of_other_collectives_raises_and_writes_nothing(name, case):
    if case == "bad_root" and name != "broadcast":
        pytest.skip("only broadcast has a root")
    outs = pool().run(cases.bad_other_collective, name=name, case=case)
    if outs[0].get("absent"):
        pytest.skip(outs[0].get("why", f"Communicator.{name} does not exist in this build"))
    for out in outs:
        assert "InvalidUsageError" in out["kind"], out
        assert OTHER[case] in out["text"], out
        assert out["unchanged"], out


REGISTER = {
    "host_numpy": (InvalidUsageError, "host memory"),
    "process_local_array": (RegistrationError, "must come from pymscclpp.alloc()"),
    "non_contiguous": (InvalidUsageError, "is not contiguous"),
    "empty_view": (RegistrationError, "cannot register an empty buffer"),
    "not_an_array": (InvalidUsageError, "expected a device array, got list"),
    "none": (InvalidUsageError, "expected a device array, got NoneType"),
}


@pytest.mark.parametrize("case", list(REGISTER))
def test_bad_register_memory_argument_is_refused(case):
    for out in pool().run(cases.bad_register_memory, case=case):
        _check(out, *REGISTER[case])


MEMORY_CHANNEL = {
    "peer_is_self": (InvalidUsageError, "is not another rank of 0..1"),
    "peer_negative": (InvalidUsageError, "peer -1 is not another rank"),
    "peer_out_of_range": (InvalidUsageError, "peer 2 is not another rank"),
    "peer_is_a_string": (InvalidUsageError, "peer '"),
    "peer_is_a_float": (InvalidUsageError, ".0 is not another rank"),
    "zero_semaphores": (InvalidUsageError, "semaphores=0: expected a positive integer"),
    "negative_semaphores": (InvalidUsageError, "semaphores=-2: expected a positive integer"),
    "too_many_semaphores": (InvalidUsageError, "PYMSCCLPP_MAX_SEMAPHORES"),
    "semaphores_not_an_int": (InvalidUsageError, "semaphores"),
    "host_src": (InvalidUsageError, "host memory"),
    "process_local_inbox": (RegistrationError, "must come from pymscclpp.alloc()"),
}


@pytest.mark.parametrize("case", [pytest.param(c, marks=_gap(c)) for c in MEMORY_CHANNEL])
def test_bad_memory_channel_argument_is_refused_and_later_channels_still_work(case):
    for out in pool().run(cases.bad_memory_channel, case=case, timeout=60):
        assert out["still_works"] and out["device_error"] is None, out
        _check(out, *MEMORY_CHANNEL[case])


EXCHANGE = {
    "peer_is_self": (InvalidUsageError, "is not another rank"),
    "peer_out_of_range": (InvalidUsageError, "peer 5 is not another rank"),
    "host_buffer": (InvalidUsageError, "host memory"),
    "process_local_buffer": (RegistrationError, "must come from pymscclpp.alloc()"),
}


@pytest.mark.parametrize("case", list(EXCHANGE))
def test_bad_exchange_memory_argument_is_refused_and_the_pair_stays_in_step(case):
    for out in pool().run(cases.bad_exchange_memory, case=case, timeout=60):
        assert out["still_works"], out
        _check(out, *EXCHANGE[case])


# ---------------------------------------------------------------- bootstrap send/recv (threads, in process)

BOOTSTRAP = {
    "data_is_str": (lambda b: b.send("text", 1, 0), InvalidUsageError, "data must be bytes-like, got str"),
    "data_is_int": (lambda b: b.send(5, 1, 0), InvalidUsageError, "data must be bytes-like, got int"),
    "data_is_none": (lambda b: b.send(None, 1, 0), InvalidUsageError, "got NoneType"),
    "peer_is_self": (lambda b: b.send(b"x", 0, 0), InvalidUsageError, "is this rank"),
    "peer_out_of_range": (lambda b: b.send(b"x", 2, 0), InvalidUsageError, "peer=2: must be in [0, 2)"),
    "peer_negative": (lambda b: b.send(b"x", -1, 0), InvalidUsageError, "peer=-1"),
    "peer_is_a_string": (lambda b: b.send(b"x", "1", 0), InvalidUsageError, "expected an int"),
    "peer_is_a_bool": (lambda b: b.send(b"x", True, 0), InvalidUsageError, "expected an int"),
    "tag_negative": (lambda b: b.send(b"x", 1, -1), InvalidUsageError, "tag=-1"),
    "tag_reserved": (lambda b: b.send(b"x", 1, 2**63), InvalidUsageError, "must be in [0, 9223372036854775808)"),
    "tag_is_a_float": (lambda b: b.send(b"x", 1, 1.5), InvalidUsageError, "tag=1.5: expected an int"),
    "oversize_message": (lambda b: b.send(bytes(1025), 1, 0), InvalidUsageError, "exceeds the bootstrap limit of 1024"),
    "recv_negative_timeout": (lambda b: b.recv(1, 0, timeout=-1), InvalidUsageError, "timeout=-1"),
    "recv_nan_timeout": (lambda b: b.recv(1, 0, timeout=math.nan), InvalidUsageError, "timeout=nan"),
    "recv_str_timeout": (lambda b: b.recv(1, 0, timeout="1"), InvalidUsageError, "timeout='1'"),
    "recv_bad_tag": (lambda b: b.recv(1, -5), InvalidUsageError, "tag=-5"),
}


@pytest.mark.parametrize("case", list(BOOTSTRAP))
def test_bad_bootstrap_send_or_recv_is_refused_and_delivers_nothing(case, monkeypatch):
    from pymscclpp.runtime.bootstrap.local import LocalBootstrap
    call, error, words = BOOTSTRAP[case]
    monkeypatch.setenv("PYMSCCLPP_BOOTSTRAP_MAX_MSG", "1024")
    group = LocalBootstrap.create(2, timeout=5)
    try:
        with pytest.raises(error, match=None) as info:
            call(group[0])
        assert words in str(info.value), str(info.value)
        assert not group[1]._mailbox._queues, "a refused send delivered something"
        group[0].send(b"still fine", 1, 3)  # the group keeps working
        assert group[1].recv(0, 3) == b"still fine"
    finally:
        for b in group:
            b.close()


# ---------------------------------------------------------------- environment values

def _comm_from_env():
    from pymscclpp import Communicator
    from pymscclpp.runtime.bootstrap.local import LocalBootstrap
    return Communicator(LocalBootstrap.create(1, timeout=5)[0])


ENV = {  # case: (variable, value, what to call, error type, words)
    "timeout_not_a_number": ("PYMSCCLPP_TIMEOUT_S", "soon", "config", InvalidUsageError, "expected a number of seconds"),
    "timeout_negative": ("PYMSCCLPP_TIMEOUT_S", "-1", "config", InvalidUsageError, "expected a number of seconds in [0,"),
    "timeout_nan": ("PYMSCCLPP_TIMEOUT_S", "nan", "config", InvalidUsageError, "expected a number of seconds in [0,"),
    "timeout_inf": ("PYMSCCLPP_TIMEOUT_S", "inf", "comm", InvalidUsageError, "PYMSCCLPP_TIMEOUT_S"),
    "timeout_too_large_for_u64_ns": ("PYMSCCLPP_TIMEOUT_S", "1e30", "comm", InvalidUsageError, "PYMSCCLPP_TIMEOUT_S"),
    "max_semaphores_zero": ("PYMSCCLPP_MAX_SEMAPHORES", "0", "comm", InvalidUsageError, "expected a positive integer"),
    "max_semaphores_negative": ("PYMSCCLPP_MAX_SEMAPHORES", "-3", "comm", InvalidUsageError, "expected a positive integer"),
    "max_semaphores_word": ("PYMSCCLPP_MAX_SEMAPHORES", "many", "comm", InvalidUsageError, "expected a positive integer"),
    "max_semaphores_float": ("PYMSCCLPP_MAX_SEMAPHORES", "1.5", "comm", InvalidUsageError, "expected a positive integer"),
    "backend_unknown": ("PYMSCCLPP_BACKEND", "cuda", "backend", BackendError, "expected one of auto, gpu, sim, compile"),
    "backend_typo": ("PYMSCCLPP_BACKEND", "simulator", "backend", BackendError, "expected one of"),
    "debug_unknown_level": ("PYMSCCLPP_DEBUG", "LOUD", "debug", InvalidUsageError, "PYMSCCLPP_DEBUG='LOUD': expected LEVEL"),
    "debug_unknown_level_with_subsystems": ("PYMSCCLPP_DEBUG", "VERBOSE:bootstrap", "debug", InvalidUsageError,
                                            "with LEVEL one of ERROR"),
    "max_msg_word": ("PYMSCCLPP_BOOTSTRAP_MAX_MSG", "lots", "wire", InvalidUsageError, "expected a number of bytes"),
    "max_msg_zero": ("PYMSCCLPP_BOOTSTRAP_MAX_MSG", "0", "wire", InvalidUsageError, "between 1 and 2**63-1"),
    "sim_threads_word": ("PYMSCCLPP_SIM_THREADS", "four", "config", InvalidUsageError, "expected a positive integer"),
    "sim_threads_zero": ("PYMSCCLPP_SIM_THREADS", "0", "config", InvalidUsageError, "expected a positive integer"),
    "max_scratch_word": ("PYMSCCLPP_MAX_SCRATCH_BYTES", "1GB", "config", InvalidUsageError,
                         "expected a positive number of bytes"),
    "ib_port_word": ("PYMSCCLPP_IB_PORT", "first", "config", InvalidUsageError, "expected a port number in [1, 255]"),
    "ib_gid_negative": ("PYMSCCLPP_IB_GID_INDEX", "-1", "config", InvalidUsageError, "expected a GID index"),
    "proxy_spin_word": ("PYMSCCLPP_PROXY_SPIN_US", "long", "config", InvalidUsageError, "non-negative number"),
    "launch_unknown": ("PYMSCCLPP_LAUNCH", "fast", "config", BackendError, "expected packed, params or numba"),
    "liveness_word": ("PYMSCCLPP_LIVENESS", "maybe", "config", InvalidUsageError, "expected 1 (on, true, yes) or 0"),
    "torch_fallback_unknown": ("PYMSCCLPP_TORCH_FALLBACK", "mpi", "config", InvalidUsageError,
                               "expected nccl, gloo or none"),
    "job_token_short": ("PYMSCCLPP_JOB_TOKEN", "abcd", "config", InvalidUsageError, "expected 32 hex digits"),
    "proxy_cpus_garbage": ("PYMSCCLPP_PROXY_CPUS", "3-1", "config", InvalidUsageError, "auto, inherit or a CPU list"),
    "tuning_file_missing": ("PYMSCCLPP_TUNING_FILE", "/nonexistent/table.json", "tuning", InvalidUsageError,
                            "cannot read a selection table"),
}
ENV_GAPS: dict = {}


def _env_call(what: str, case: str):
    if what == "config":
        from pymscclpp import config
        return config.get(ENV[case][0])
    if what == "comm":
        comm = _comm_from_env()
        try:
            import numpy as np
            np.uint64(comm.timeout_ns)  # what every device handle carries
        finally:
            comm.close()
        return comm
    if what == "backend":
        from pymscclpp.runtime import backend
        return backend._select()
    if what == "debug":
        from pymscclpp import _log
        return _log._configure()
    if what == "wire":
        from pymscclpp.runtime.bootstrap import wire
        return wire.max_payload()
    if what == "tuning":
        from pymscclpp.algos import collection
        return collection.load_table()
    raise AssertionError(what)


@pytest.mark.parametrize("case", [pytest.param(c, marks=[pytest.mark.xfail(strict=True, reason=ENV_GAPS[c])]
                                               if c in ENV_GAPS else []) for c in ENV])
def test_bad_environment_value_is_refused_naming_the_variable(case, monkeypatch):
    import gc
    import os
    from pymscclpp import _log
    from pymscclpp.runtime.liveness import segments_of
    variable, value, what, error, words = ENV[case]
    gc.collect()
    before = set(segments_of(os.getpid()))
    monkeypatch.setenv(variable, value)
    monkeypatch.setattr(_log, "_configured", False)  # let _configure read the environment again
    with pytest.raises(error) as info:
        _env_call(what, case)
    assert words in str(info.value), str(info.value)
    gc.collect()
    assert set(segments_of(os.getpid())) <= before, "a refused setting left shared memory behind"


# ---------------------------------------------------------------- plans

def _base_plan() -> dict:
    from pymscclpp.language.programs import PROGRAMS
    return PROGRAMS["allreduce_allpairs"](2)


def _mutate(fn):
    def make():
        plan = _base_plan()
        fn(plan)
        return plan
    return make


PLANS = {  # case: (make the source, words)
    "not_json": (lambda: "{not json", "not valid JSON"),
    "json_list": (lambda: [], "expected an object, got list"),
    "missing_file": (lambda: "/nonexistent/dir/plan.json", "/nonexistent/dir/plan.json"),
    "missing_gpus": (_mutate(lambda p: p.pop("gpus")), "gpus: missing"),
    "no_gpus": (_mutate(lambda p: p.update(gpus=[])), "at least one gpu"),
    "unknown_protocol": (_mutate(lambda p: p.update(protocol="Fast")), "protocol: must be 'Simple' or 'LL'"),
    "threads_not_an_int": (_mutate(lambda p: p.update(num_threads_per_block="lots")), "num_threads_per_block"),
    "threads_is_a_bool": (_mutate(lambda p: p.update(num_threads_per_block=True)), "expected int, got bool"),
    "gpu_id_out_of_order": (_mutate(lambda p: p["gpus"][1].update(id=0)), "gpus[1].id: must equal its position 1"),
    "min_above_max_message": (_mutate(lambda p: p.update(min_message_size=10, max_message_size=5)),
                              "exceeds max_message_size"),
    "unknown_op": (_mutate(lambda p: p["gpus"][0]["threadblocks"][0]["ops"][0].update(name="teleport")),
                   "unknown op 'teleport'"),
    "channel_to_itself": (_mutate(lambda p: p["gpus"][0]["channels"][0].update(connected_to=[0])),
                          "cannot connect to itself"),
    "peer_rank_out_of_range": (_mutate(lambda p: p["gpus"][0]["channels"][0].update(connected_to=[7])),
                               "expected a rank in [0, 2)"),
    "negative_chunk_index": (_mutate(lambda p: p["gpus"][0]["threadblocks"][0]["ops"][4]["src_buff"][0].update(index=-1)),
                             "index"),
}
EXEC_PLANS = {
    "too_many_threads_per_block": (_mutate(lambda p: p.update(num_threads_per_block=4096)),
                                   "exceeds the 1024 threads a CUDA block can have"),
    "port_channel_type": (_mutate(lambda p: p["gpus"][0]["channels"][0].update(channel_type="port")),
                          "no memory channel to rank 1"),
}


@pytest.mark.parametrize("case", list(PLANS))
def test_bad_plan_is_refused_by_load_plan_naming_where_and_leaves_the_source_unchanged(case):
    from pymscclpp.plan import PlanError, load_plan
    source = PLANS[case][0]()
    before = copy.deepcopy(source)
    with pytest.raises((PlanError, OSError)) as info:
        load_plan(source)
    assert PLANS[case][1] in str(info.value), str(info.value)
    assert source == before, "load_plan modified the plan it was given"


@pytest.mark.parametrize("case", list(PLANS) + list(EXEC_PLANS))
def test_bad_plan_is_refused_by_execution_plan(case):
    from pymscclpp.executor import ExecutionPlan
    from pymscclpp.plan import PlanError
    make, words = {**PLANS, **EXEC_PLANS}[case]
    source = make()
    before = copy.deepcopy(source)
    with pytest.raises((PlanError, OSError)) as info:
        ExecutionPlan.from_plan(source)
    assert words in str(info.value), str(info.value)
    assert source == before


@pytest.mark.parametrize("value", [float("inf"), float("nan"), -1.0, 1e30, "60", True])
def test_bad_per_communicator_timeout_is_refused_before_anything_is_set_up(value):
    from pymscclpp import Communicator
    from pymscclpp.runtime.bootstrap.local import LocalBootstrap
    with pytest.raises(InvalidUsageError, match=r"timeout_s=.*must be a number of seconds in \[0, 1e\+07\]"):
        Communicator(LocalBootstrap.create(1, timeout=5)[0], timeout_s=value)
