"""Peer liveness: a heartbeat monitor over the bootstrap connections, and cleanup after dead peers.

``LivenessMonitor(bootstrap).start()`` (a collective call: every rank starts it, in the same order
as its other bootstrap collectives) runs one thread per rank that

- sends a small heartbeat to every peer each ``interval`` seconds, under a bootstrap tag reserved
  for it (above every user tag, so it never mixes with user or setup messages);
- declares a peer dead when its bootstrap connection breaks (a process killed with ``kill -9``:
  the kernel closes its sockets, so this takes milliseconds) or when no heartbeat came for
  ``dead_after`` seconds (a frozen process or a lost host: its sockets stay open);
- then fails every pending and later bootstrap wait on that peer at once with
  ``PeerDisconnectedError`` (so barriers and setup do not sit out their whole budget), logs it,
  calls the ``on_death`` callbacks, and unlinks the dead process's POSIX shared-memory segments
  (``/dev/shm/pymscclpp-*-<pid>-*``), which it can no longer unlink itself.

``check()`` raises ``PeerDisconnectedError`` naming the dead peer, for calls made after a device
wait timed out (a kernel's waits on a dead peer end at their ``timeout_s`` budget; the monitor
says why). ``stop()`` (collective, before closing the bootstrap) says goodbye, so peers that stop
normally are not reported dead.

MPI: heartbeats are not sent (MPI may not allow a second thread to communicate, and the launcher
aborts a job whose rank died); the monitor then only reports bootstrap-detected losses.

The runtime Communicator starts one (unless ``PYMSCCLPP_LIVENESS=0``), aborts its kernels' device waits
when a peer dies (``on_death``), checks it first in ``check_device_errors`` and stops it in ``close``.
"""

from __future__ import annotations

import os
import re
import struct
import threading
import time
import weakref
from typing import Callable

from .. import config
from .._log import get_logger
from ..errors import InvalidUsageError, PeerDisconnectedError
from .bootstrap.wire import TAG_LIMIT
from .deadline import Deadline

_log = get_logger("liveness")
HEARTBEAT_TAG = TAG_LIMIT + 0x4C56  # bootstrap-reserved tags ("LV"), one per monitor of a bootstrap: never user tags
_MONITORS_MADE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # bootstrap -> monitors started on it
_BEAT = struct.Struct("<BQq")       # kind (1 beat, 2 bye), sequence number, sender's pid
_BEAT_KIND, _BYE_KIND = 1, 2
ENV = "PYMSCCLPP_LIVENESS"          # "0" turns the monitor off where a communicator would start it
DECLARED = "declared dead by the liveness monitor: "  # how a monitor's verdict reads in the bootstrap's record
_SHM_DIR = "/dev/shm"
EXIT_WAIT_S = 2.0  # how long ``stop`` waits for a peer whose connection broke to finish exiting
_SEGMENT = re.compile(r"^pymscclpp(?:-[a-z]+)*-(\d+)-[0-9a-f]+$")


def liveness_enabled() -> bool:
    """False when PYMSCCLPP_LIVENESS is 0/off/false; True otherwise."""
    return config.get(ENV)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (a zombie, dead but not yet reaped, counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in (b"Z", b"X")


def segments_of(pid: int, shm_dir: str = _SHM_DIR) -> list[str]:
    """Names of pymscclpp shared-memory segments created by process ``pid`` (pid is part of each name)."""
    try:
        names = os.listdir(shm_dir)
    except OSError:
        return []
    return sorted(n for n in names if (m := _SEGMENT.match(n)) and int(m.group(1)) == pid)


def reap_segments(pids, shm_dir: str = _SHM_DIR) -> list[str]:
    """Unlink the segments of every process in ``pids`` that is no longer alive; the names removed.

    Only dead processes' segments go: peers still mapping them keep their mappings (unlinking
    removes the name, not the memory), so this is safe to call while survivors still run.
    """
    removed = []
    for pid in set(pids):
        if pid <= 0 or pid == os.getpid() or pid_alive(pid):
            continue
        for name in segments_of(pid, shm_dir):
            try:
                os.unlink(os.path.join(shm_dir, name))
                removed.append(name)
            except FileNotFoundError:
                pass
            except OSError as exc:
                _log.warning("could not unlink %s of dead process %d: %s", name, pid, exc)
    if removed:
        _log.info("removed %d shared-memory segment(s) of dead process(es) %s", len(removed), sorted(set(pids)))
    return removed


def wait_gone(pids, seconds: float) -> bool:
    """Wait up to ``seconds`` until no process in ``pids`` is alive (a killed process closes its sockets before it
    has finished exiting); whether none is."""
    deadline = Deadline(seconds)
    while any(pid > 0 and pid != os.getpid() and pid_alive(pid) for pid in pids):
        if deadline.expired():
            return False
        time.sleep(0.01)
    return True


def reap_orphans(shm_dir: str = _SHM_DIR) -> list[str]:
    """Unlink every pymscclpp segment on this host whose creating process is dead (e.g. at job start,
    or from a launcher after it killed a frozen rank); the names removed."""
    try:
        names = os.listdir(shm_dir)
    except OSError:
        return []
    pids = {int(m.group(1)) for n in names if (m := _SEGMENT.match(n))}
    return reap_segments(pids, shm_dir)


class LivenessMonitor:
    """Watches the peers of ``bootstrap`` (see the module docstring)."""

    def __init__(self, bootstrap, interval: float = 0.5, dead_after: float | None = None,
                 on_death: Callable[[int, str], None] | None = None, reap: bool = True) -> None:
        if not (isinstance(interval, (int, float)) and 0 < interval < 3600):
            raise InvalidUsageError(f"interval={interval!r}: expected seconds in (0, 3600)")
        if dead_after is None:
            dead_after = max(10.0, 8 * interval)
        if not (isinstance(dead_after, (int, float)) and dead_after > interval):
            raise InvalidUsageError(f"dead_after={dead_after!r}: expected seconds > interval ({interval})")
        self.bootstrap = bootstrap
        self.rank, self.size = bootstrap.rank, bootstrap.size
        self.interval, self.dead_after, self.reap = float(interval), float(dead_after), reap
        self._callbacks = [on_death] if on_death is not None else []
        self._mailbox = getattr(bootstrap, "_mailbox", None)
        self._beats = type(bootstrap).__name__ != "MpiBootstrap" and self._mailbox is not None
        self._lock = threading.Lock()
        self._observing = threading.RLock()  # the thread's ticks and callers of ``dead()`` observe one at a time
        self._dead: dict[int, str] = {}
        self._broken: set[int] = set()  # dead peers whose connection broke: exiting, not frozen
        self._left: set[int] = set()
        self._last: dict[int, float] = {}
        self.pids: dict[int, int] = {}
        self._seq = 0
        self.tag = HEARTBEAT_TAG
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started_at: float | None = None

    # -- public ----------------------------------------------------------------------------------
    def start(self) -> "LivenessMonitor":
        """Exchange pids with every rank (collective) and start the monitor thread; returns self."""
        blobs = self.bootstrap.all_gather(struct.pack("<q", os.getpid()), what="process ids")
        # the k-th monitor of a bootstrap on every rank (starting is collective) beats under tag k: monitors of one
        # bootstrap never take each other's heartbeats or goodbyes
        k = _MONITORS_MADE.get(self.bootstrap, 0)
        _MONITORS_MADE[self.bootstrap] = k + 1
        self.tag = HEARTBEAT_TAG + k
        self.pids = {r: struct.unpack("<q", b)[0] for r, b in enumerate(blobs) if r != self.rank}
        now = time.monotonic()
        self._last = {p: now for p in self.pids}
        self.started_at = now
        if self.size > 1:
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name=f"pymscclpp-liveness-r{self.rank}")
            self._thread.start()
        return self

    def on_death(self, callback: Callable[[int, str], None]) -> None:
        """Call ``callback(peer, reason)`` (from the monitor thread) when a peer is declared dead."""
        self._callbacks.append(callback)

    def dead(self) -> dict[int, str]:
        """Dead peers so far, with the reason each was declared dead. What the bootstrap has already seen counts
        at once, not from the monitor's next tick (a broken connection, or a death another monitor of the same
        bootstrap declared)."""
        if self.started_at is not None and self.size > 1:
            self._observe()
        with self._lock:
            return dict(self._dead)

    def check(self) -> None:
        """Raise PeerDisconnectedError naming the peer declared dead first (the likely cause), if any."""
        dead = self.dead()
        if dead:
            peer = next(iter(dead))
            others = sorted(set(dead) - {peer})
            more = f" (also dead: peers {others})" if others else ""
            raise PeerDisconnectedError(f"rank {self.rank}: peer {peer} (pid {self.pids.get(peer, '?')}) is dead: "
                                        f"{dead[peer]}{more}")

    def wait_for_death(self, timeout: float) -> dict[int, str]:
        """Block until some peer is declared dead or ``timeout`` passes; the dead peers."""
        deadline = Deadline(timeout)
        while not self.dead() and not deadline.expired():
            time.sleep(min(0.02, self.interval))
        return self.dead()

    def stop(self, goodbye: bool = True) -> None:
        """Say goodbye to the peers (unless ``goodbye`` is False: an abort sends nothing) and end the thread;
        idempotent. Call before closing the bootstrap."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.size > 1 and self.started_at is not None:
            self._observe()  # a peer that died since the last tick is still declared (and cleaned up)
        if self.reap and self._dead:  # again: a peer that was a zombie at its death is gone by now, and one whose
            # connection broke may still have been exiting then (its segments go once it is gone: bounded)
            wait_gone([self.pids[p] for p in self._broken], EXIT_WAIT_S)
            reap_segments([self.pids[p] for p in self._dead])
        if goodbye and self._beats and not self.bootstrap.closed:
            for peer in self.pids:
                if peer not in self._dead:
                    self._send(peer, _BYE_KIND)

    def __enter__(self) -> "LivenessMonitor":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- thread ----------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval if self._beats else min(self.interval, 0.1)):
                self._tick()
        except Exception:  # the monitor must never take the rank down
            _log.exception("rank %d: liveness monitor failed; peers are no longer watched", self.rank)

    def _tick(self) -> None:
        self._observe()
        if self._beats:
            for peer in self.pids:
                if peer not in self._dead and peer not in self._left:
                    self._send(peer, _BEAT_KIND)

    def _observe(self) -> None:
        """Drain heartbeats, then declare dead the peers whose connection broke or who went silent."""
        with self._observing:
            self._observe_once()

    def _observe_once(self) -> None:
        lost = self._mailbox.lost() if self._mailbox is not None else {}
        now = time.monotonic()
        if self._beats:  # after snapshotting losses: a BYE precedes its connection's EOF
            for peer in self.pids:
                while (data := self._mailbox.pop(peer, self.tag)) is not None:
                    if len(data) == _BEAT.size:
                        kind, _, _ = _BEAT.unpack(data)
                        self._last[peer] = now
                        if kind == _BYE_KIND:
                            self._left.add(peer)
        for peer in self.pids:
            if peer in self._dead or peer in self._left:
                continue
            if peer in lost:  # a death another monitor of this bootstrap declared keeps its reason
                why = lost[peer]
                if not why.startswith(DECLARED):
                    self._broken.add(peer)
                self._declare(peer, why[len(DECLARED):] if why.startswith(DECLARED)
                              else f"its bootstrap connection broke ({why})")
            elif self._beats and now - self._last[peer] > self.dead_after:
                self._declare(peer, f"no heartbeat for {now - self._last[peer]:.1f} s "
                                    f"(limit {self.dead_after} s): process frozen or host unreachable")

    def _send(self, peer: int, kind: int) -> None:
        self._seq += 1
        try:
            self.bootstrap._send(_BEAT.pack(kind, self._seq, os.getpid()), peer, self.tag,
                                 Deadline(self.interval), f"liveness: heartbeat to peer {peer}")
        except Exception as exc:  # a broken connection is reported by the bootstrap's receiver
            _log.debug("rank %d: heartbeat to peer %d failed: %s", self.rank, peer, exc)

    def _declare(self, peer: int, reason: str) -> None:
        with self._lock:
            if peer in self._dead:
                return
            self._dead[peer] = reason
        _log.error("rank %d: peer %d (pid %s) declared dead: %s", self.rank, peer, self.pids.get(peer, "?"), reason)
        if self._mailbox is not None:
            self._mailbox.lose(peer, DECLARED + reason)
        if self.reap:
            reap_segments([self.pids[peer]])
        for callback in self._callbacks:
            try:
                callback(peer, reason)
            except Exception:
                _log.exception("rank %d: liveness callback failed", self.rank)
