"""The runtime Communicator: a bootstrap, a device, token pools, and pairwise setup of memory and channels.

Built once per rank (``from_mpi``, ``from_unique_id``, ``from_env`` or from any Bootstrap); the
collective API and the executor sit on top of it.
"""

from __future__ import annotations

import collections
import functools
import struct
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Iterable, TypeVar

import numpy as np

from .. import config
from .._log import get_logger
from ..errors import CallMismatchError, CommAbortedError, CommTimeoutError, InvalidUsageError, PeerDisconnectedError
from .device_errors import ERR_WORDS, MISMATCH, WaitContext, describe
from . import handoff, watchdog
from .backend import IS_SIM, announce
from .deadline import Deadline
from .memory import RegisteredMemory, RemoteMemory, host_id, view_as
from .liveness import LivenessMonitor, liveness_enabled
from .setup_guard import SetupGuard
from .shrink import agree_survivors, split_groups
from .buffers import Buffer
from .tokens import DevicePool, HostPool, PeerPools

if TYPE_CHECKING:
    from .bootstrap import Bootstrap, UniqueId
    from .memory_channel import MemoryChannel

_log = get_logger("comm")
_POOL_MSG = struct.Struct("<16s64sQ")
_PAIR_TAG_BASE = 1 << 40  # bootstrap tags at and above this are the communicator's pairwise setup
_DRAIN_S = 5.0  # how long abort() waits for other threads' calls to end (their waits end within microseconds)
_ABORTED_BY_CALL = np.uint64(1 << 63)  # the abort word after abort(): no peer's number (peer + 1)
_Method = TypeVar("_Method", bound=Callable[..., Any])


def entry(method: _Method) -> _Method:
    """Mark a public call of a communicator: refused with CommAbortedError once it is aborted, and one in flight in
    any thread when ``abort()`` comes ends with CommAbortedError (``abort`` waits for it before releasing)."""
    name = method.__name__

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls = self._calls
        calls.append(None)  # before the check: abort() sets the flag, then waits for the calls it sees
        try:
            if self.aborted:
                raise self.aborted_error(name)
            return method(self, *args, **kwargs)
        except Exception as exc:
            if self.aborted and not isinstance(exc, CommAbortedError):
                raise self.aborted_error(name) from exc
            raise
        finally:
            calls.pop()
    return call  # type: ignore[return-value]


class Communicator:
    """One rank's view of the job: peers, its GPU, and the means to connect channels to peers."""

    def __init__(self, bootstrap: Bootstrap, device: int | None = None, timeout_s: float | str | None = "env",
                 transport: str | None = None) -> None:
        """``timeout_s``: budget of this communicator's device waits ("env": PYMSCCLPP_TIMEOUT_S; 0 or None: off)."""
        self.bootstrap = bootstrap
        self.aborted = False  # abort() was called: every call raises CommAbortedError
        self._calls: collections.deque = collections.deque()  # one entry per public call in flight (``entry``)
        self._on_abort: list[Callable[[], None]] = []
        self._closed = False
        self.transport = transport  # PortChannel transport override for every peer (None: by topology)
        self.rank, self.size = bootstrap.rank, bootstrap.size
        announce(self.rank)
        self.job_token = bootstrap.job_token
        self.timeout_s = (config.get("PYMSCCLPP_TIMEOUT_S") if isinstance(timeout_s, str) and timeout_s == "env"
                          else None if timeout_s is None
                          else config.checked_timeout_s(timeout_s, f"timeout_s={timeout_s!r}"))
        self.timeout_ns = 0 if self.timeout_s is None else int(self.timeout_s * 1e9)
        self.host_ids = bootstrap.all_gather(host_id(), what="host ids")
        me = self.host_ids[self.rank]
        self.local_peers = [r for r in range(self.size) if self.host_ids[r] == me]
        self.local_rank = self.local_peers.index(self.rank)
        self.device = self._select_device(device)
        self._pair_seq = [0] * self.size
        restart = weakref.WeakMethod(self._restart_pairs)  # the guard must not keep its communicator alive
        self._setup_guard = SetupGuard(bootstrap, lambda scope: restart()(scope))  # type: ignore[misc]
        self._closables: list = []
        self._extensions: dict = {}
        slots = config.get("PYMSCCLPP_MAX_SEMAPHORES")
        self.device_pool = DevicePool(slots, self.job_token, self.rank, self.device)
        self.host_pool = HostPool(slots + ERR_WORDS + 1)  # + the error area and the abort word, taken first
        err_slot = self.host_pool.slots.take(ERR_WORDS)  # host memory the device writes: read with no sync
        self.error_area = view_as(self.host_pool.device_inbound(err_slot, ERR_WORDS), np.int64)
        self._error_words = self.host_pool.words[err_slot:err_slot + ERR_WORDS].view(np.int64)
        self._failure: Exception | None = None
        self._abort_slot = self.host_pool.slots.take()  # host memory the device reads: see abort_device_waits
        self.abort_word = self.host_pool.device_inbound(self._abort_slot)
        # raise_if_failed's two words as memoryviews: an index reads the memory into a Python int (~40 ns)
        self._watched = (memoryview(self._error_words[:1]),  # type: ignore[arg-type]  # (numpy's 3.11 stubs)
                         memoryview(self.host_pool.words[self._abort_slot:][:1]))  # type: ignore[arg-type]
        watchdog.watch(self)  # before the liveness thread starts: a bad setting raises with nothing to undo
        self.peer_pools = self._exchange_pools()
        self.liveness = LivenessMonitor(bootstrap).start() if liveness_enabled() and self.size > 1 else None
        if self.liveness is not None:
            abort = weakref.WeakMethod(self.abort_device_waits)  # nor the monitor
            self.liveness.on_death(lambda peer, _reason: abort()(peer))  # type: ignore[misc]
        _log.info("rank %d/%d up on %s device %d (%d local peers)", self.rank, self.size,
                  "sim" if IS_SIM else "GPU", self.device, len(self.local_peers))

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_mpi(cls, mpi_comm: Any = None, **kwargs: Any) -> "Communicator":
        """From an mpi4py communicator (COMM_WORLD by default)."""
        from .bootstrap import MpiBootstrap
        return cls(MpiBootstrap(mpi_comm), **kwargs)

    @classmethod
    def from_unique_id(cls, unique_id: UniqueId, rank: int, size: int, **kwargs: Any) -> "Communicator":
        """From a unique id made by ``pymscclpp.get_unique_id()`` on one rank and shared by the launcher."""
        from .bootstrap import TcpBootstrap
        return cls(TcpBootstrap(rank, size, unique_id), **kwargs)

    @classmethod
    def from_env(cls, **kwargs: Any) -> "Communicator":
        """From torchrun-style RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT."""
        from .bootstrap import TcpBootstrap
        return cls(TcpBootstrap.from_env(), **kwargs)

    def _select_device(self, device: int | None) -> int:
        if IS_SIM:
            return 0
        from numba import cuda
        count = len(cuda.gpus)
        dev = self.local_rank % count if device is None else device
        if not 0 <= dev < count:
            raise InvalidUsageError(f"device {dev} does not exist: this host has {count} GPUs")
        cuda.select_device(dev)
        return dev

    def _exchange_pools(self) -> dict[int, PeerPools]:
        mine = _POOL_MSG.pack(self.job_token, self.host_pool.segment.name.encode(), self.host_pool.segment.nbytes)
        blobs = self.bootstrap.all_gather(mine + self.device_pool.registered.serialize(), what="device-pool handles")
        pools = {}
        for peer in self.local_peers:
            if peer == self.rank:
                continue
            token, name, nbytes = _POOL_MSG.unpack(blobs[peer][:_POOL_MSG.size])
            pools[peer] = PeerPools(blobs[peer][_POOL_MSG.size:], name.rstrip(b"\0").decode(), nbytes,
                                    self.job_token)
        self.bootstrap.barrier()  # every peer mapped our segments: they survive our unlinking them
        return pools

    # -- pairwise setup -----------------------------------------------------------------------
    def check_peer(self, peer: int, same_host: bool = False) -> None:
        """Raise InvalidUsageError unless ``peer`` is another rank (on this host when ``same_host``)."""
        if not isinstance(peer, (int, np.integer)) or not 0 <= peer < self.size or peer == self.rank:
            raise InvalidUsageError(f"rank {self.rank}: peer {peer!r} is not another rank of 0..{self.size - 1}")
        if same_host and peer not in self.peer_pools:
            raise InvalidUsageError(f"rank {self.rank}: peer {peer} is on another host; memory channels and "
                                    "semaphores need the same host (use a PortChannel)")

    def next_pair_tag(self, peer: int) -> int:
        """The next bootstrap tag of this pair's setup sequence (both sides advance in step)."""
        self._pair_seq[peer] += 1
        return _PAIR_TAG_BASE + self._pair_seq[peer]

    def _restart_pairs(self, scope: int) -> None:
        """After failed set-up ``scope`` (pairs stopped at different steps), every pair restarts its sequence at
        the same fresh tags."""
        self._pair_seq = [scope << 32] * self.size

    def setup(self, what: str, absent: str = "") -> ContextManager[None]:
        """``with comm.setup("what"):`` runs collective set-up (every rank, same order): if it raises on any rank,
        every rank raises the same error within milliseconds, naming the failing rank and its cause; ``absent``:
        why a peer may not begin it, for the error when one does not."""
        return self._setup_guard.scope(what, absent)

    def register_memory(self, buf: Buffer) -> RegisteredMemory:
        """Validate and register a device buffer of this rank."""
        return RegisteredMemory(buf, job_token=self.job_token, rank=self.rank, device=self.device)

    @entry
    def exchange_memory(self, buf: Buffer, peer: int) -> RemoteMemory:
        """Register ``buf``, send it to ``peer``, and map the buffer ``peer`` sends back (pairwise)."""
        self.check_peer(peer, same_host=True)
        reg = self.register_memory(buf)
        remote = handoff.trade(self.bootstrap, peer, self.next_pair_tag(peer), reg.serialize(),
                               lambda data: RemoteMemory(data, job_token=self.job_token),
                               f"registered buffer of {reg.nbytes} bytes (exchange_memory)")
        if remote.rank != peer:
            raise InvalidUsageError(f"rank {self.rank}: memory handle from peer {peer} claims rank {remote.rank}")
        self._closables.append(remote)
        return remote

    @entry
    def memory_channel(self, peer: int, src: Buffer, inbox: Buffer | None = None, semaphores: int = 1) -> MemoryChannel:
        """A MemoryChannel to ``peer`` (both ranks call it): put from ``src`` into the peer's inbox;
        ``semaphores`` independent signal/wait tokens (e.g. one per thread block)."""
        from .memory_channel import MemoryChannel
        return MemoryChannel(self, peer, src, inbox, self._semaphore_count(semaphores))

    @entry
    def memory_channels(self, peers: Iterable[int], src: Buffer, inbox: Buffer | None = None,
                        semaphores: int = 1) -> dict[int, MemoryChannel]:
        """MemoryChannels to each of ``peers`` (in ascending order on every rank), keyed by peer; the pool is
        checked for all their semaphores first, so a pool too small fails before any exchange."""
        peers = sorted(peers)
        if peers:
            self.device_pool.slots.check(len(peers) * self._semaphore_count(semaphores))
        return {p: self.memory_channel(p, src, inbox, semaphores) for p in peers}

    def _semaphore_count(self, semaphores: object) -> int:
        if not isinstance(semaphores, (int, np.integer)) or isinstance(semaphores, bool) or semaphores < 1:
            raise InvalidUsageError(f"rank {self.rank}: semaphores={semaphores!r}: expected a positive integer")
        return int(semaphores)

    def extension(self, key: str, make: Callable[[Communicator], Any] | None = None) -> Any:
        """The object registered under ``key`` (made by ``make(self)`` on first use when given, else None);
        it is closed (if it has ``close``) with the communicator. Layers above keep per-communicator state here (the NCCL fallback)."""
        if key not in self._extensions and make is not None:
            obj = self._extensions[key] = make(self)
            if hasattr(obj, "close"):
                self._closables.append(obj)
        return self._extensions.get(key)

    # -- errors and teardown ------------------------------------------------------------------
    def check_device_errors(self) -> None:
        """Raise if a device wait of this communicator's kernels ran out of budget or was aborted:
        PeerDisconnectedError first if the liveness monitor found a dead peer (the likely cause), else
        CommTimeoutError, or CallMismatchError if the call check found ranks' calls disagreeing. Sticky, as NCCL's asynchronous errors: once raised, every later call raises it again,
        until the communicator is closed and a new one made. After ``abort()``: CommAbortedError."""
        if self.aborted:
            raise self.aborted_error("check_device_errors")
        if self._failure is not None:
            raise self._failure
        try:
            if self.liveness is not None:
                self.liveness.check()
            text = self.device_error()
            if text is not None:
                raise (CallMismatchError if self._error_words[0] == MISMATCH else CommTimeoutError)(text)
        except (CommTimeoutError, PeerDisconnectedError, CallMismatchError) as exc:
            self._failure = exc
            raise

    def fail(self, exc: Exception) -> None:
        """Record ``exc`` as this communicator's failure, raised by every later call (as a device wait's failure is):
        a host-side check found the ranks' calls disagreeing."""
        self._failure = exc

    def device_error(self) -> str | None:
        """The text of the failure a device wait recorded, or None (one host-memory read; no sync)."""
        if self.aborted:  # its waits' records say "aborted": the calls raise CommAbortedError instead
            return None
        return describe(self._error_words)

    def raise_if_failed(self) -> None:
        """``check_device_errors`` at the cost of one host-memory read when nothing failed (every call makes it)."""
        if self.aborted:
            raise self.aborted_error("call")
        error, abort = self._watched
        if self._failure is not None or error[0] or abort[0]:
            self.check_device_errors()

    def wait_context(self, peer: int = -1, channel: int = -1) -> WaitContext:
        """The error context device waits of this communicator's kernels record failures with."""
        return WaitContext(self.error_area, self.abort_word, np.int64(self.rank), np.int64(peer), np.int64(channel),
                           np.uint64(self.timeout_ns))

    def abort_device_waits(self, peer: int) -> None:
        """End every device wait of this communicator's kernels, now and later, within microseconds (each
        records why; ``check_device_errors`` then raises): the liveness monitor calls it when ``peer`` dies."""
        self.host_pool.words[self._abort_slot] = np.uint64(peer + 1)

    @entry
    def barrier(self) -> None:
        """Host barrier over the bootstrap."""
        self.bootstrap.barrier()

    def shrink(self, exclude: Iterable[int] | None = None) -> "Communicator":
        """A new communicator of the survivors (collective among them): every rank but ``exclude`` (default: the
        ranks the liveness monitor found dead), renumbered in the old order, over a new bootstrap whose root is the
        lowest survivor; nothing is sent to an excluded rank. This communicator is aborted (released) on the way:
        it fits after a peer died mid-collective (the survivors got PeerDisconnectedError), and again after the
        next death. A rank that dies during the agreement is excluded too."""
        if self.aborted:
            raise self.aborted_error("shrink")
        gone = set(self.liveness.dead()) if exclude is None and self.liveness is not None else \
            set() if exclude is None else self._ranks_of(exclude, "shrink: exclude")
        members, uid = agree_survivors(self.bootstrap, gone)
        self.abort()
        return self._successor(members, uid)

    @entry
    def split(self, color: int | None, key: int = 0) -> "Communicator | None":
        """``ncclCommSplit``: a new communicator of the ranks that pass the same ``color`` (an int >= 0), ranked by
        ``key`` then old rank; color None: not a member (returns None). Collective over every rank of this one,
        which stays as it was."""
        if color is not None and (not isinstance(color, (int, np.integer)) or isinstance(color, bool)
                                  or not 0 <= color < 2**63):
            raise InvalidUsageError(f"rank {self.rank}: split: color={color!r}: expected an int >= 0 or None")
        if not isinstance(key, (int, np.integer)) or isinstance(key, bool) or not -2**63 <= key < 2**63:
            raise InvalidUsageError(f"rank {self.rank}: split: key={key!r}: expected a 64-bit int")
        plan = split_groups(self.bootstrap, None if color is None else int(color), int(key))
        return None if plan is None else self._successor(*plan)

    def _ranks_of(self, ranks: Iterable[int], what: str) -> set[int]:
        out = set()
        for r in ranks:
            if not isinstance(r, (int, np.integer)) or isinstance(r, bool) or not 0 <= r < self.size:
                raise InvalidUsageError(f"rank {self.rank}: {what}: {r!r} is not a rank of 0..{self.size - 1}")
            out.add(int(r))
        return out

    def _successor(self, members: list[int], uid: UniqueId) -> "Communicator":
        """This rank's communicator among ``members`` (old ranks in new-rank order), over a bootstrap from ``uid``,
        with this one's device, budgets and transport."""
        from .bootstrap import TcpBootstrap
        bootstrap = TcpBootstrap(members.index(self.rank), len(members), uid, timeout=self.bootstrap.timeout)
        try:
            return type(self)(bootstrap, device=self.device, timeout_s=self.timeout_s, transport=self.transport)
        except BaseException:
            bootstrap.close()
            raise

    def on_abort(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` first thing in ``abort()``, before it waits for calls in flight: what ends waits this
        communicator's abort word does not reach (a proxy's FIFO)."""
        self._on_abort.append(callback)

    def aborted_error(self, what: str) -> CommAbortedError:
        """The error of call ``what`` on this aborted communicator."""
        return CommAbortedError(f"rank {self.rank}: {what}: the communicator was aborted (comm.abort()); make a new "
                                "one (shrink, split, or a new unique id)")

    def abort(self) -> None:
        """End every wait of this communicator now, in any thread (device waits within microseconds, bootstrap
        waits at once: the call in flight raises CommAbortedError), then release everything without a message to
        any peer (no goodbye, no collective step): later calls raise CommAbortedError at once. Idempotent; a
        ``close()`` after it does nothing."""
        if self.aborted or self._closed:
            self.aborted = True
            return
        self.aborted = True
        watchdog.unwatch(self)  # the waits about to end record an abort: no error of the watchdog's to report
        _log.warning("rank %d: communicator aborted", self.rank)
        self.host_pool.words[self._abort_slot] = _ABORTED_BY_CALL
        for callback in self._on_abort:
            callback()
        self.bootstrap.abort("the communicator was aborted (comm.abort())")
        drain = Deadline(_DRAIN_S)  # (no call of this communicator calls abort(): they are all elsewhere)
        while self._calls and not drain.expired():
            time.sleep(0.001)
        if self._calls:
            _log.error("rank %d: abort: calls in other threads did not end within %s s; releasing anyway",
                       self.rank, _DRAIN_S)
        if not IS_SIM:  # kernels launched before the abort: ended before their peers' memory is unmapped
            from .cudadrv import synchronize_within
            if not synchronize_within(max(0.1, drain.remaining() or 0.0)):
                _log.error("rank %d: abort: kernels still ran %s s after the abort; releasing anyway", self.rank,
                           _DRAIN_S)
        self._release(goodbye=False)

    def close(self) -> None:
        """Unmap peers' memory, release token pools and the bootstrap; idempotent (nothing after ``abort()``)."""
        if not self._closed:
            self._release(goodbye=True)

    def _release(self, goodbye: bool) -> None:
        """Give back everything this communicator holds; ``goodbye``: tell the peers (a normal close)."""
        self._closed = True
        self._on_abort.clear()
        watchdog.unwatch(self)
        if self.liveness is not None:
            self.liveness.stop(goodbye)
            self.liveness = None
        for item in self._closables:
            item.close()
        self._closables.clear()
        self._extensions.clear()  # they hold the communicator: no reference cycle outlives close()
        for pool in self.peer_pools.values():
            pool.close()
        self.peer_pools = {}
        self.host_pool.close()
        self.bootstrap.close()

    def __enter__(self) -> "Communicator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
