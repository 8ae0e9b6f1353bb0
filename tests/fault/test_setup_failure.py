"""A set-up or resource failure on some ranks (registration refused, semaphore pool exhausted) raises the
same error on every rank within 1 s, naming the failing rank; no rank waits out a bootstrap timeout."""

from __future__ import annotations

from fault import setup_cases
from fault.harness import Job

SPREAD_S = 1.0  # every rank's error within this of the first one


def _failures(job: Job, ranks, scopes: int) -> dict[str, list[tuple]]:
    """Each scope's (type, text, time) by rank, once every rank reported ``scopes`` failures."""
    deadline_s = 120
    job.outcomes(ranks, deadline_s)
    by_scope: dict[str, list[tuple]] = {}
    for rank, kind, value, _ in sorted(job.messages, key=lambda m: m[0]):
        if kind == "failed":
            what, name, text, at = value
            by_scope.setdefault(what, []).append((rank, name, text, at))
    assert len(by_scope) == scopes and all(len(v) == len(ranks) for v in by_scope.values()), by_scope
    return by_scope


def _assert_symmetric(reports: list[tuple], name: str, text: str) -> None:
    times = [at for _, _, _, at in reports]
    assert {(n, t) for _, n, t, _ in reports} == {(name, text)}, reports
    assert max(times) - min(times) < SPREAD_S, f"errors spread over {max(times) - min(times):.2f} s"


def test_registration_refused_on_one_rank_raises_on_every_rank_and_channels_work_afterwards():
    job = Job(setup_cases.registration_fails_on_one_rank, 3, bad_rank=1)
    try:
        failures = _failures(job, range(3), 1)
        outs = job.outcomes(range(3), 60)
    finally:
        job.close()
    _assert_symmetric(failures["memory channels"], "RegistrationError",
                      "memory channels failed on rank 1: under the simulator, memory shared with peers must come "
                      "from pymscclpp.alloc() (POSIX shared memory); this buffer is process-local")
    for rank, (kind, value, _) in outs.items():
        assert kind == "done", value
        assert value == {p: p + 1 for p in range(3) if p != rank}, "a channel maps the wrong peer's memory"


def test_pool_exhausted_on_some_ranks_raises_the_lowest_ones_error_on_every_rank_for_channels_and_algorithms():
    job = Job(setup_cases.pool_exhausted_on_some_ranks, 3, env={"PYMSCCLPP_MAX_SEMAPHORES": "8"},
              short_ranks=[0, 1])
    try:
        failures = _failures(job, range(3), 2)
    finally:
        job.close()
    _assert_symmetric(failures["all-peer channels"], "InvalidUsageError",
                      "all-peer channels failed on rank 0: the device semaphore pool cannot give 4 more semaphores "
                      "(3 of 8 left); set PYMSCCLPP_MAX_SEMAPHORES higher (also failed on rank 1)")
    _assert_symmetric(failures["all_reduce simple"], "InvalidUsageError",
                      "all_reduce simple failed on rank 0: the device semaphore pool cannot give 4 more semaphores "
                      "(3 of 8 left); set PYMSCCLPP_MAX_SEMAPHORES higher (also failed on rank 1)")
