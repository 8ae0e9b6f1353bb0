"""Built-in grids fit every rank's share of the GPU: cut to the smallest SM count when a rank holds fewer SMs
than the grid has blocks, capped by PYMSCCLPP_MAX_BLOCKS, the same on every rank."""

from __future__ import annotations

import struct
from types import SimpleNamespace

import pytest

from pymscclpp.algos import grid
from pymscclpp.errors import InvalidUsageError


def _limits(rows) -> grid.GridLimits:
    boot = SimpleNamespace(all_gather=lambda raw, what=None: [struct.pack("<qq", *row) for row in rows])
    return grid.GridLimits(SimpleNamespace(bootstrap=boot))


def test_a_grid_that_fits_the_smallest_share_is_kept():
    assert _limits([(132, 0), (132, 0)]).blocks(128) == 128


def test_a_grid_larger_than_some_ranks_share_runs_on_the_smallest_share():
    limits = _limits([(132, 0), (14, 0), (66, 0)])
    assert limits.blocks(128) == 14 and limits.blocks(16) == 14 and limits.blocks(4) == 4


def test_max_blocks_caps_every_grid_with_the_smallest_cap_any_rank_asked_for():
    limits = _limits([(132, 8), (132, 0), (132, 32)])
    assert limits.blocks(128) == 8 and limits.blocks(4) == 4


def test_max_blocks_must_be_a_number(monkeypatch):
    monkeypatch.setenv("PYMSCCLPP_MAX_BLOCKS", "many")
    with pytest.raises(InvalidUsageError, match="PYMSCCLPP_MAX_BLOCKS='many'"):
        grid._local_limits()


def test_zero_copy_calls_below_the_small_call_size_run_on_half_the_grid_and_at_least_two_blocks():
    small = grid.SMALL_CALL_BYTES - 1
    assert grid.call_blocks(16, small) == 8 and grid.call_blocks(66, small) == 33
    assert grid.call_blocks(3, small) == 2 and grid.call_blocks(2, small) == 2 and grid.call_blocks(1, small) == 1
    assert grid.call_blocks(16, grid.SMALL_CALL_BYTES) == 16 and grid.call_blocks(16, 1 << 30) == 16


def test_zero_copy_calls_that_only_move_bytes_run_on_half_the_grid_up_to_16_mb():
    assert grid.call_blocks(16, 16 << 20, copies=True) == 8 and grid.call_blocks(66, 1 << 20, copies=True) == 33
    assert grid.call_blocks(16, grid.SMALL_COPY_BYTES, copies=True) == 16
    assert grid.call_blocks(16, 16 << 20) == 16  # a reduction from 4 MB: all of it
