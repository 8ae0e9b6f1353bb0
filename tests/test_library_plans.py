"""The library's DSL programs as algorithms named by their parameters (``plan:PROGRAM/PROTOCOL/iN/cN``): names
round-trip, the tuner's search space, ``algo=`` and a tuning file naming one, and clear refusals."""

from __future__ import annotations

import json

import pytest

import library_plan_cases as cases
from pymscclpp.algos.library_plans import CHUNK_FACTORS, INSTANCES, LibraryPlan, search_space
from pymscclpp.errors import InvalidUsageError
from rankpool import PoolCache

TUNED = "plan:allreduce_allpairs/packet/i2/c1"


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    path = tmp_path_factory.mktemp("tuning") / "tuning.json"
    path.write_text(json.dumps({"2": {"all_reduce": [[float("inf"), TUNED]]}}))
    cache = PoolCache(env={"PYMSCCLPP_TIMEOUT_S": "30", "PYMSCCLPP_TUNING_FILE": str(path)})
    yield cache(2)
    cache.close()


def test_a_library_plan_name_says_every_parameter_and_parses_back():
    spec = LibraryPlan("allreduce_rsag", "simple", 4, 2)
    assert spec.name == "plan:allreduce_rsag/simple/i4/c2"
    assert LibraryPlan.parse(spec.name) == spec
    assert LibraryPlan.parse("rsag") is None


@pytest.mark.parametrize("name, words", [
    ("plan:allreduce_rsag/simple/4/1", "is named plan:PROGRAM/PROTOCOL/iINSTANCES/cCHUNK_FACTOR"),
    ("plan:allreduce_rsag", "is named plan:PROGRAM"),
    ("plan:nosuch/simple/i1/c1", "no library program 'nosuch'"),
    ("plan:allreduce_rsag/packet/i1/c1", "allreduce_rsag runs the protocols ('simple',)"),
])
def test_a_malformed_library_plan_name_is_refused_in_words(name, words):
    with pytest.raises(InvalidUsageError, match=words.replace("(", r"\(").replace(")", r"\)")):
        LibraryPlan.parse(name)


def test_the_tuner_searches_every_protocol_instance_count_and_chunk_factor_of_each_program():
    space = search_space(8, "all_reduce")
    grid = len(INSTANCES) * len(CHUNK_FACTORS)
    assert {s.program for s in space} == {"allreduce_allpairs", "allreduce_rsag"}
    assert len(space) == 2 * grid + grid  # allpairs: simple and packet; rsag: simple
    assert all(LibraryPlan.parse(s.name) == s for s in space)
    assert {s.program for s in search_space(8, "all_gather")} == {"allgather"}


def test_a_tuning_file_naming_a_library_plan_makes_the_selection_build_and_use_it(pool):
    assert pool.run(cases.all_reduce_served_by, count=333, algo=None) == [TUNED, TUNED]


@pytest.mark.parametrize("algo", ["plan:allreduce_rsag/simple/i1/c2", "plan:allreduce_allpairs/simple/i2/c1"])
def test_an_all_reduce_forced_onto_a_library_plan_matches_numpy(pool, algo):
    assert pool.run(cases.all_reduce_served_by, count=1000, algo=algo) == [algo, algo]


def test_a_library_plan_of_another_collective_is_refused_on_every_rank(pool):
    texts = pool.run(cases.refused, algo="plan:allgather/simple/i1/c1")
    assert all("'plan:allgather/simple/i1/c1' serves all_gather, not all_reduce" in t for t in texts), texts
