"""Differential fuzzing: random valid DSL programs through the verifier, the interpreter and the executor on the
simulator agree bit for bit, or all refuse with one error class. A falsifying example prints as
``build(ProgramSpec(...))``: add that spec to REGRESSIONS so it runs on every CI run."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from pymscclpp.testing import strategies as S
from pymscclpp.testing.differential import assert_agree, outcomes, plan_inputs
from pymscclpp.testing.programs import ProgramSpec, Step, build

ENV = {"PYMSCCLPP_TIMEOUT_S": "30"}

# shrunk programs worth keeping: a packet step after a tb switch on both ranks, a remote reduce of a chunk a get
# wrote, and a three-rank chain through scratch over the second channel pair
REGRESSIONS = [
    ProgramSpec(2, 1, 1, 1, 1, 2, (Step("copy", 0, 1, 0, 1, ("s", 0), ("i", 0)),
                                   Step("packets", 0, 1, 0, 0, ("o", 0), ("s", 0)))),
    ProgramSpec(2, 2, 1, 1, 1, 1, (Step("get", 1, 0, 0, 0, ("s", 0), ("i", 1)),
                                   Step("remote_reduce", 0, 1, 0, 0, ("o", 0), ("i", 0), ("s", 0)))),
    ProgramSpec(3, 1, 1, 2, 2, 2, (Step("put", 0, 1, 1, 0, ("s", 1), ("i", 0)),
                                   Step("put", 1, 2, 1, 0, ("o", 0), ("s", 1)),
                                   Step("reduce", 2, 0, 0, 1, ("o", 0), ("o", 0), ("i", 0)))),
]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(S.dsl_programs())
def test_random_programs_agree_across_verifier_interpreter_and_executor(ranks, drawn):
    plan = drawn.to_dict()
    assert_agree(outcomes(ranks(drawn.spec.nranks, env=ENV), plan, plan_inputs(plan)))


@pytest.mark.parametrize("spec", REGRESSIONS, ids=lambda s: f"{s.nranks}ranks-{len(s.steps)}steps")
def test_kept_programs_agree_across_verifier_interpreter_and_executor(ranks, spec):
    plan = build(spec).to_dict()
    found = outcomes(ranks(spec.nranks, env=ENV), plan, plan_inputs(plan))
    assert found["executor"].error is None
    assert_agree(found)


def test_a_disagreement_is_reported_with_the_differing_outputs(ranks):
    plan = build(REGRESSIONS[0]).to_dict()
    found = outcomes(ranks(2, env=ENV), plan, plan_inputs(plan))
    wrong = found["executor"].outputs[0][1].copy()
    wrong[0] += 1
    found["executor"].outputs[0][1] = wrong
    with pytest.raises(AssertionError, match="execution 0 rank 1: interpreter"):
        assert_agree(found)
