"""Set-up scopes over bootstraps (ranks as threads): a failure on one rank ends every rank's set-up at once,
with one error naming the lowest failing rank; scopes that succeed, and later scopes, are unaffected."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from pymscclpp.errors import InvalidUsageError, PymscclppError, RegistrationError, SetupAbortedError
from pymscclpp.runtime.bootstrap import TcpBootstrap, get_unique_id
from pymscclpp.runtime.bootstrap.local import LocalBootstrap
from pymscclpp.runtime.setup_guard import SetupGuard

BUDGET_S = 30.0  # the bootstraps' wait budget: every failure below must end far sooner


def group(kind: str, n: int):
    if kind == "local":
        return LocalBootstrap.create(n, timeout=BUDGET_S)
    uid = get_unique_id("127.0.0.1")
    return on_ranks(lambda r: TcpBootstrap(r, n, uid, timeout=BUDGET_S), range(n))


def on_ranks(fn, ranks):
    """``fn(rank)`` on one thread per rank: each rank's result or the exception it raised, by rank."""
    ranks = list(ranks)
    with ThreadPoolExecutor(len(ranks)) as pool:
        futures = [pool.submit(fn, r) for r in ranks]
        out = []
        for f in futures:
            exc = f.exception(timeout=BUDGET_S + 10)
            out.append(exc if exc is not None else f.result())
        return out


def guarded(bs_list, body):
    """Every rank runs ``body(bs)`` in one scope; (outcome, seconds from start) by rank, and the scopes each
    rank's failure callback got."""
    start = time.monotonic()
    restarts = [[] for _ in bs_list]

    def rank(r):
        bs = bs_list[r]
        try:
            with SetupGuard(bs, restarts[r].append).scope("test set-up"):
                return body(bs), time.monotonic() - start
        except PymscclppError as exc:
            return exc, time.monotonic() - start

    return on_ranks(rank, range(len(bs_list))), restarts


def ring_then(fail_at: dict, tag: int = 10, fail_round: int = 1):
    """A body: three rounds of exchanges with both ring neighbours (tags from ``tag``); rank r raises
    ``fail_at[r]`` before round ``fail_round``."""
    def body(bs):
        right, left = (bs.rank + 1) % bs.size, (bs.rank - 1) % bs.size
        for rnd in range(3):
            if rnd == fail_round and bs.rank in fail_at:
                raise fail_at[bs.rank]
            bs.send(b"x", right, tag + rnd)
            bs.send(b"y", left, tag + 3 + rnd)
            bs.recv(left, tag + rnd)
            bs.recv(right, tag + 3 + rnd)
        return "ok"
    return body


@pytest.mark.parametrize("kind", ["local", "tcp"])
def test_one_rank_failing_mid_exchange_raises_its_error_on_every_rank_within_a_second(kind):
    bs = group(kind, 4)
    try:
        outs, restarts = guarded(bs, ring_then({2: RegistrationError("cannot register this buffer")}))
        for exc, seconds in outs:
            assert type(exc) is RegistrationError, exc
            assert str(exc) == "test set-up failed on rank 2: cannot register this buffer"
            assert exc.failed_rank == 2 and seconds < 1.0
        assert all(r == [1] for r in restarts), "every rank restarts its pairwise state after the failed scope"
        later, _ = guarded(bs, ring_then({}, tag=20))  # the next scope is clean: the old abort was scope 1's
        assert [v for v, _ in later] == ["ok"] * 4
    finally:
        for b in bs:
            b.close()


def test_several_failing_ranks_give_every_rank_the_lowest_ones_error_and_name_the_others():
    bs = group("local", 4)
    try:
        fail_at = {3: KeyError("three"), 1: InvalidUsageError("pool of one is empty")}
        outs, _ = guarded(bs, ring_then(fail_at, fail_round=0))  # both fail before any receive could see an abort
        texts = {str(exc) for exc, _ in outs}
        assert texts == {"test set-up failed on rank 1: pool of one is empty (also failed on rank 3)"}
        assert all(type(exc) is InvalidUsageError for exc, _ in outs)
    finally:
        for b in bs:
            b.close()


def test_a_foreign_exception_type_becomes_a_pymscclpp_error_naming_it():
    bs = group("local", 2)
    try:
        outs, _ = guarded(bs, ring_then({0: MemoryError("out of device memory")}))
        for exc, _ in outs:
            assert type(exc) is PymscclppError
            assert str(exc) == "test set-up failed on rank 0: MemoryError: out of device memory"
    finally:
        for b in bs:
            b.close()


def test_an_interrupted_rank_keeps_its_interrupt_and_its_peers_raise_naming_it():
    bs = group("local", 3)
    try:
        outs = on_ranks(lambda r: _interrupt_on(bs[r], 2), range(3))
        assert isinstance(outs[2], KeyboardInterrupt)
        assert all(type(e) is PymscclppError and str(e) == "test set-up failed on rank 2: KeyboardInterrupt: "
                   for e in outs[:2]), outs
    finally:
        for b in bs:
            b.close()


def _interrupt_on(bs, victim: int):
    with SetupGuard(bs, lambda scope: None).scope("test set-up"):
        if bs.rank == victim:
            raise KeyboardInterrupt
        bs.recv(victim, 1)


def test_a_peer_gone_before_the_verdicts_counts_as_failed_and_the_others_still_agree():
    bs = group("local", 3)
    bs[2].close()  # never takes part: its peers see it disconnected
    try:
        def rank(r):
            try:
                with SetupGuard(bs[r], lambda scope: None).scope("test set-up"):
                    if r == 0:
                        raise InvalidUsageError("zero refuses")
                    bs[r].recv(0, 1)
            except PymscclppError as exc:
                return exc

        outs = on_ranks(rank, range(2))
        assert {str(e) for e in outs} == {"test set-up failed on rank 0: zero refuses (also failed on rank 2)"}
    finally:
        for b in bs:
            b.close()


def test_a_rank_that_finished_its_body_still_raises_when_a_peer_fails_afterwards():
    bs = group("local", 3)

    def body(b):
        if b.rank == 0:
            time.sleep(0.2)  # the others are done and waiting for rank 0's "done" by now
            raise InvalidUsageError("late failure")
        return "ok"

    try:
        outs, _ = guarded(bs, body)
        assert all(isinstance(exc, InvalidUsageError) and "failed on rank 0: late failure" in str(exc)
                   for exc, _ in outs)
    finally:
        for b in bs:
            b.close()


def test_receives_outside_a_scope_and_in_nested_scopes_follow_the_outermost_scope():
    bs = group("local", 2)
    try:
        guards = [SetupGuard(b, lambda scope: None) for b in bs]

        def rank(r):
            with guards[r].scope("outer"):
                with guards[r].scope("inner"):  # belongs to the outer scope: one agreement, at its end
                    bs[r].send(b"in", 1 - r, 5)
                    return bs[r].recv(1 - r, 5)

        assert on_ranks(rank, range(2)) == [b"in", b"in"]
        assert [b.open_scope() for b in bs] == [2, 2], "the nested scope opened no scope of its own"
        for b in bs:
            b.close_scope()
        bs[0].abort_scope(7, "a scope nobody opened")  # an abort of another scope touches no receive
        bs[0].send(b"after", 1, 6)
        assert bs[1].recv(0, 6) == b"after"
    finally:
        for b in bs:
            b.close()


def test_a_receive_in_an_aborted_scope_raises_setup_aborted_naming_the_peer():
    bs = group("local", 3)
    try:
        scope = bs[1].open_scope()
        bs[2].abort_scope(scope, "InvalidUsageError: no more semaphores")
        with pytest.raises(SetupAbortedError, match="rank 1: recv from peer 0 tag 3: set-up aborted by rank 2") as info:
            bs[1].recv(0, 3)
        assert info.value.origin == 2
    finally:
        for b in bs:
            b.close()


@pytest.mark.parametrize("kind", ["local", "tcp"])
def test_ranks_setting_up_different_things_fail_at_once_naming_both(kind):
    bs_list = group(kind, 3)
    start = time.monotonic()

    def rank(r):
        what = "all_gather algorithm 'packet'" if r == 2 else "all_reduce algorithm 'packet'"
        try:
            with SetupGuard(bs_list[r], lambda scope: None).scope(what):
                bs_list[r].all_gather(b"x")  # set-up traffic that would not match across the ranks
        except PymscclppError as exc:
            return exc
        return None

    outcomes = on_ranks(rank, range(3))
    assert time.monotonic() - start < 5
    for exc in outcomes:
        assert isinstance(exc, InvalidUsageError), exc
        text = str(exc)
        assert "all_reduce algorithm 'packet'" in text and "all_gather algorithm 'packet'" in text, text
        assert "rank 2" in text and "the ranks' calls do not match" in text, text
