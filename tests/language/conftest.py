"""Shared helpers for the DSL tests."""

from __future__ import annotations

import copy

import pytest


def ops_of(plan: dict, rank: int, tb: int) -> list[dict]:
    """The op list of one thread block of a plan dict."""
    return plan["gpus"][rank]["threadblocks"][tb]["ops"]


def names(plan: dict, rank: int, tb: int) -> list[str]:
    return [op["name"] for op in ops_of(plan, rank, tb)]


def without_op(plan: dict, rank: int, tb: int, index: int) -> dict:
    """A copy of ``plan`` with one op removed."""
    out = copy.deepcopy(plan)
    del out["gpus"][rank]["threadblocks"][tb]["ops"][index]
    return out


@pytest.fixture
def allgather_plan() -> dict:
    from pymscclpp.language.programs import allgather
    return allgather(3)
