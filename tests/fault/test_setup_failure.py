"""A set-up or resource failure on some ranks (registration refused, semaphore pool exhausted) raises the
same error on every rank within 1 s, naming the failing rank; no rank waits out a bootstrap timeout."""

from __future__ import annotations

from fault import setup_cases
from rankpool import RankPool

SPREAD_S = 1.0  # every rank's error within this of the first one
PRELOAD = ("pymscclpp", "fault.setup_cases")


def _run(fn, size: int, env: dict, **params) -> list:
    pool = RankPool(size, env={"PYMSCCLPP_TIMEOUT_S": "60", **env}, start_timeout=300, preload=PRELOAD)
    try:
        return pool.run(fn, timeout=120, **params)
    finally:
        pool.close()


def _assert_symmetric(outs: list, what: str, name: str, texts: set) -> None:
    """Every rank raised the same ``name`` error in scope ``what``, its text one of ``texts``, all within
    ``SPREAD_S``."""
    reports = [next(e for e in errors if e[0] == what) for errors, _ in outs]
    assert len({(n, t) for _, n, t, _ in reports}) == 1, reports
    assert reports[0][1] == name and reports[0][2] in texts, reports
    times = [at for *_, at in reports]
    assert max(times) - min(times) < SPREAD_S, f"errors spread over {max(times) - min(times):.2f} s"


def test_registration_refused_on_one_rank_raises_on_every_rank_and_channels_work_afterwards():
    outs = _run(setup_cases.registration_fails_on_one_rank, 3, {}, bad_rank=1)
    _assert_symmetric(outs, "memory channels", "RegistrationError",
                      {"memory channels failed on rank 1: under the simulator, memory shared with peers must come "
                       "from pymscclpp.alloc() (POSIX shared memory); this buffer is process-local"})
    for rank, (_, markers) in enumerate(outs):
        assert markers == {p: p + 1 for p in range(3) if p != rank}, "a channel maps the wrong peer's memory"


def test_pool_exhausted_on_some_ranks_raises_the_lowest_ones_error_on_every_rank_for_channels_and_algorithms():
    outs = _run(setup_cases.pool_exhausted_on_some_ranks, 3, {"PYMSCCLPP_MAX_SEMAPHORES": "8"}, short_ranks=[0, 1])
    for what in ("all-peer channels", "all_reduce simple"):
        # the error of the lowest rank that failed on its own: a short rank that a peer's abort reached before its
        # own check is not among them (the set-up traffic before the pool check decides which got there first)
        cause = ("the device semaphore pool cannot give 4 more semaphores (3 of 8 left); set "
                 "PYMSCCLPP_MAX_SEMAPHORES higher")
        _assert_symmetric(outs, what, "InvalidUsageError",
                          {f"{what} failed on rank 0: {cause} (also failed on rank 1)",
                           f"{what} failed on rank 0: {cause}", f"{what} failed on rank 1: {cause}"})
