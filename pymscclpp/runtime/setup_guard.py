"""Symmetric failure of collective set-up: when one rank's set-up raises, every rank raises the same error.

``SetupGuard.scope(what)`` opens the bootstrap's next set-up scope. A rank whose body raises tells every
peer (an abort message), so peers' receives of that scope raise at once instead of waiting out their
timeout; a rank whose body succeeds waits for every peer's "done" (which an abort also ends). Then the
ranks that failed exchange verdicts, so all of them raise one error: the lowest failing rank's, of its
class, naming that rank, its cause and the other ranks that failed.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator

from .. import errors
from ..errors import BootstrapError, CommTimeoutError, PymscclppError, SetupAbortedError

_SETUP_TAG_BASE = 1 << 60  # bootstrap tags of the scopes' "done", verdict and "what" messages: three per scope
VERDICT_GRACE_S = 0.5  # how long the verdicts are awaited once the scope's wait budget is spent


class SetupGuard:
    """The set-up scopes of one communicator; every rank opens them in the same order (they are collective)."""

    def __init__(self, bootstrap, on_failure: Callable[[int], None]):
        """``on_failure(scope)`` runs on every rank after a failed scope (to resynchronize pairwise state)."""
        self.bootstrap = bootstrap
        self.on_failure = on_failure
        self.active: int | None = None
        self._not_begun: set[int] = set()  # peers that did not begin the failed scope: no verdict comes from them

    @contextlib.contextmanager
    def scope(self, what: str, absent: str = "") -> Iterator[None]:
        """Run the body as collective set-up ``what``; nested scopes belong to the outermost one. ``absent``: why a
        peer may not begin it (added to the error when one does not)."""
        if self.active is not None:
            yield
            return
        scope = self.active = self.bootstrap.open_scope()
        self._not_begun = set()
        try:
            self._same_what(scope, what, absent)
            yield
            self._all_done(scope, what)
        except BaseException as exc:
            mine = None if isinstance(exc, SetupAbortedError) else exc
            if mine is not None:
                self.bootstrap.abort_scope(scope, f"{type(exc).__name__}: {exc}")
            left = self.bootstrap.scope_budget_left()
            self.bootstrap.close_scope()  # the verdicts are read outside the failed scope
            self.active = None
            error = self._verdict(scope, what, mine, exc, None if left is None else max(left, VERDICT_GRACE_S))
            self.on_failure(scope)
            if mine is not None and not isinstance(mine, Exception):
                raise  # KeyboardInterrupt, SystemExit: peers were told, this rank keeps its own
            raise error from mine
        finally:
            self.bootstrap.close_scope()
            self.active = None

    def _same_what(self, scope: int, what: str, absent: str) -> None:
        """Raise on every rank, before any set-up traffic, when the ranks set up different things (their calls
        differ: another collective, or a size another algorithm serves), or when a peer does not begin the same
        set-up within the budget. A peer that is gone, or whose set-up already failed, is left to the body and the
        verdicts."""
        b = self.bootstrap
        tag = _SETUP_TAG_BASE + 3 * scope + 2
        peers = [p for p in range(b.size) if p != b.rank]
        for peer in peers:
            try:
                b.send(what.encode(), peer, tag, what=f"the name of this set-up ({what})")
            except (BootstrapError, CommTimeoutError):
                pass
        for peer in peers:
            try:
                theirs = b.recv(peer, tag, what=f"the name of its set-up (ours: {what})").decode()
            except CommTimeoutError:
                self._not_begun.add(peer)
                raise CommTimeoutError(f"rank {b.rank}: rank {peer} did not begin {what} within {b.timeout} s: has it "
                                       f"made the same call?{f' ({absent})' if absent else ''}") from None
            except (SetupAbortedError, BootstrapError):
                return
            if theirs != what:
                raise errors.InvalidUsageError(f"rank {b.rank} sets up {what} but rank {peer} sets up {theirs}: "
                                               "the ranks' calls do not match")

    def _all_done(self, scope: int, what: str) -> None:
        """Tell every peer this rank's body succeeded and wait for theirs (an abort of the scope ends the wait)."""
        b = self.bootstrap
        peers = [p for p in range(b.size) if p != b.rank]
        for peer in peers:
            b.send(b"", peer, _SETUP_TAG_BASE + 3 * scope, what=f"our end of {what}")
        for peer in peers:
            b.recv(peer, _SETUP_TAG_BASE + 3 * scope, what=f"its end of {what} (it has not finished it)")

    def _verdict(self, scope: int, what: str, mine: BaseException | None, seen: BaseException,
                 timeout: float | None) -> PymscclppError:
        """The error every rank raises: from each rank its own failure (if any), the lowest rank's wins;
        ``seen`` is what ended this rank's body (``mine``, or a peer's abort). Peers' verdicts are awaited
        ``timeout`` seconds; a peer that sends none within it is not said to have failed."""
        b = self.bootstrap
        failures = {}
        if mine is not None:
            failures[b.rank] = (type(mine).__name__, str(mine))
        note = b"" if mine is None else json.dumps(failures[b.rank]).encode()
        tag = _SETUP_TAG_BASE + 3 * scope + 1
        peers = [p for p in range(b.size) if p != b.rank and p not in self._not_begun]
        for peer in peers:
            try:
                b.send(note, peer, tag, what=f"our verdict on {what}")
            except (BootstrapError, CommTimeoutError):
                pass  # its receive below reports it
        for peer in peers:
            try:
                data = b.recv(peer, tag, timeout, what=f"its verdict on {what}")
            except CommTimeoutError:  # no verdict: it may not have made this call at all
                continue
            except BootstrapError as exc:  # gone: that is its failure
                failures.setdefault(peer, (type(exc).__name__, str(exc)))
                continue
            if data:
                failures[peer] = tuple(json.loads(data))
        if not failures:  # the failing peer's verdict was lost: its abort message still names it
            failures[getattr(seen, "origin", -1)] = (type(seen).__name__, str(seen))
        first = min(failures)
        name, text = failures[first]
        others = sorted(set(failures) - {first})
        also = f" (also failed on rank{'s' if len(others) > 1 else ''} {', '.join(map(str, others))})" if others else ""
        cls = getattr(errors, name, None)
        if not (isinstance(cls, type) and issubclass(cls, PymscclppError)) or cls is SetupAbortedError:
            cls, text = PymscclppError, f"{name}: {text}"
        error = cls(f"{what} failed on rank {first}: {text}{also}")
        error.failed_rank = first
        return error
