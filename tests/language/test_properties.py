"""Properties of the library programs, the compiler and the interpreter, checked on random cases (hypothesis)."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from pymscclpp.language.channel import MemoryChannel, PortChannel
from pymscclpp.language.collectives import TestCollective
from pymscclpp.language.general import JSON
from pymscclpp.language.interpreter import RaceError, check_plan, run_plan
from pymscclpp.language.program import CollectiveProgram
from pymscclpp.language.programs import PROGRAMS
from pymscclpp.language.rank import Rank

from .conftest import without_op

# (program, keyword arguments it accepts besides the common ones)
VARIANTS = [
    ("allreduce_allpairs", {"protocol": "simple"}), ("allreduce_allpairs", {"protocol": "packet"}),
    ("allreduce_rsag", {}), ("allgather", {"protocol": "simple"}), ("allgather", {"protocol": "packet"}),
    ("reducescatter", {"protocol": "simple"}), ("reducescatter", {"protocol": "packet"}), ("alltoall", {}),
]
INPLACE = {"allreduce_allpairs", "allreduce_rsag", "allgather", "reducescatter"}

variants = st.sampled_from(VARIANTS)
rank_counts = st.integers(2, 8)
chunk_factors = st.integers(1, 3)
instance_counts = st.integers(1, 2)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _build(variant, n: int, cf: int, instances: int, **extra) -> dict:
    name, kwargs = variant
    return PROGRAMS[name](n, chunk_factor=cf, instances=instances, **kwargs, **extra)


@SETTINGS
@given(variants, rank_counts, chunk_factors, instance_counts, st.booleans(),
       st.sampled_from(["float16", "float32", "int32"]), st.integers(0, 2**16))
def test_library_programs_compute_their_collective(variant, n, cf, instances, inplace, dtype, seed):
    extra = {"inplace": inplace} if inplace and variant[0] in INPLACE else {}
    report = check_plan(_build(variant, n, cf, instances, **extra), dtype=dtype, seed=seed)
    assert report.checked and report.num_ranks == n


@SETTINGS
@given(variants, rank_counts, chunk_factors, instance_counts, st.integers(0, 2**16))
def test_fused_and_unfused_plans_give_identical_results(variant, n, cf, instances, seed):
    fused = _build(variant, n, cf, instances, instr_fusion=True)
    unfused = _build(variant, n, cf, instances, instr_fusion=False)
    in_chunks = fused["gpus"][0]["input_chunks"]
    rng = np.random.default_rng(seed)
    runs = [[rng.standard_normal(in_chunks * 8).astype(np.float32) for _ in range(n)] for _ in range(2)]
    a, b = run_plan(fused, runs, seed=seed), run_plan(unfused, runs, seed=seed + 1)
    for ka, kb in zip(a, b):
        for x, y in zip(ka, kb):
            assert np.array_equal(x, y)  # same values, bit for bit


@st.composite
def routings(draw):
    """A random set of point-to-point transfers: (src rank, src chunk, dst rank, dst chunk, channel type)."""
    n = draw(st.integers(2, 5))
    in_chunks, out_chunks = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    transfers = []
    for d in range(n):
        for c in range(out_chunks):
            if draw(st.booleans()):
                s = draw(st.sampled_from([r for r in range(n) if r != d]))
                transfers.append((s, draw(st.integers(0, in_chunks - 1)), d, c, draw(st.sampled_from(["memory", "port"])),
                                  draw(st.integers(0, 2)), draw(st.integers(0, 2))))
    return n, in_chunks, out_chunks, transfers


def _routing_program(n: int, in_chunks: int, out_chunks: int, transfers, instances: int, fusion: bool) -> dict:
    """Each transfer: the receiver signals "ready", the sender waits, puts and signals, the receiver waits."""
    with CollectiveProgram("routing", TestCollective(n, in_chunks, out_chunks), n, instances=instances,
                           instr_fusion=fusion):
        chans = []
        for s, _, d, _, kind, _, _ in transfers:
            cls = MemoryChannel if kind == "memory" else PortChannel
            chans.append((cls(d, s), cls(s, d)))  # made in pairs, so the k-th channels each way pair up
        for (_, back), (_, _, _, _, _, _, td) in zip(chans, transfers):
            back.signal(tb=td)
        for (ch, _), (s, sc, d, dc, kind, ts, _) in zip(chans, transfers):
            ch.wait(tb=ts)
            ch.put(Rank(d).get_output_buffer()[dc:dc + 1], Rank(s).get_input_buffer()[sc:sc + 1], tb=ts)
            ch.signal(tb=ts)
            if kind == "port":
                ch.flush(tb=ts)
        for (_, back), (_, _, _, _, _, _, td) in zip(chans, transfers):
            back.wait(tb=td)
        return json.loads(JSON())


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(routings(), instance_counts, st.booleans(), st.integers(0, 2**16))
def test_random_valid_routings_interpret_without_race(routing, instances, fusion, seed):
    n, in_chunks, out_chunks, transfers = routing
    plan = _routing_program(n, in_chunks, out_chunks, transfers, instances, fusion)
    rng = np.random.default_rng(seed)
    elems = 4  # float32 elements per chunk: 16 bytes
    runs = [[rng.standard_normal(in_chunks * instances * elems).astype(np.float32) for _ in range(n)] for _ in range(2)]
    outs = run_plan(plan, runs, seed=seed)
    for k in range(2):
        for s, sc, d, dc, *_ in transfers:
            for i in range(instances):
                got = outs[k][d][(dc * instances + i) * elems:][:elems]
                want = runs[k][s][(sc * instances + i) * elems:][:elems]
                assert np.array_equal(got, want)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([v for v in VARIANTS if v[1].get("protocol") != "packet"]), st.integers(2, 6), chunk_factors,
       instance_counts, st.booleans(), st.data())
def test_dropping_any_wait_from_a_correct_program_is_reported_as_a_race(variant, n, cf, instances, fusion, data):
    plan = _build(variant, n, cf, instances, instr_fusion=fusion)
    waits = [(g["id"], tb["id"], i) for g in plan["gpus"] for tb in g["threadblocks"]
             for i, op in enumerate(tb["ops"]) if op["name"] == "wait"]
    rank, tb, index = data.draw(st.sampled_from(waits))
    try:
        check_plan(without_op(plan, rank, tb, index))
    except RaceError:
        return
    raise AssertionError(f"dropping wait gpus[{rank}].threadblocks[{tb}].ops[{index}] went unnoticed")
