"""Host side of semaphores between two ranks: device-to-device, host-to-device, host-to-host.

Each is built by both ranks of a pair (the same call on each side). Tokens are monotonic
64-bit counters; a device handle is the plain-data tuple that ``channels.semaphore`` reads.
A device semaphore may hold ``count`` independent tokens (one per thread block, say),
addressed by index on the device.
"""

from __future__ import annotations

import time
from collections import namedtuple

import numpy as np

from ..errors import CommTimeoutError, InvalidUsageError
from .deadline import Deadline

SemaphoreHandle = namedtuple(
    "SemaphoreHandle", "inbound outbound expected err abort rank peer channel timeout_ns")


def _exchange_slot(comm, peer: int, slot: int, count: int, kind: str) -> int:
    """Send our first slot number and count to ``peer``; receive its own (the counts must agree)."""
    tag = comm.next_pair_tag(peer)
    what = f"slot number and count (pair set-up of a {kind})"
    comm.bootstrap.send(np.array([slot, count], np.int64).tobytes(), peer, tag, what=f"our {what}")
    data = comm.bootstrap.recv(peer, tag, what=f"its {what}")
    if len(data) != 16:
        raise InvalidUsageError(f"rank {comm.rank}: bad {kind} slot message from peer {peer}")
    peer_slot, peer_count = (int(x) for x in np.frombuffer(data, np.int64))
    if peer_count != count:
        raise InvalidUsageError(f"rank {comm.rank}: {kind} with peer {peer} has {count} tokens here but "
                                f"{peer_count} there; both ranks must ask for the same count")
    return peer_slot


class Device2DeviceSemaphore:
    """``count`` semaphores a kernel signals and a kernel on the peer's GPU waits on."""

    def __init__(self, comm, peer: int, count: int = 1):
        comm.check_peer(peer, same_host=True)
        self.comm, self.peer, self.count = comm, peer, count
        self.slot = comm.device_pool.slots.take(count)
        self.peer_slot = _exchange_slot(comm, peer, self.slot, count, "device semaphore")
        self.id = self.slot

    def device_handle(self) -> SemaphoreHandle:
        """Plain data for device code: our inbound tokens, the peer's, our expected counters."""
        c, n = self.comm, self.count
        return SemaphoreHandle(c.device_pool.inbound(self.slot, n),
                               c.peer_pools[self.peer].device_inbound(self.peer_slot, n),
                               c.device_pool.expected_counter(self.slot, n), c.error_area, c.abort_word,
                               np.int64(c.rank),
                               np.int64(self.peer), np.int64(self.id), np.uint64(c.timeout_ns))


class Host2DeviceSemaphore:
    """The host signals, the peer's GPU waits (the proxy's completion signal); also the reverse pair."""

    def __init__(self, comm, peer: int):
        comm.check_peer(peer, same_host=True)
        self.comm, self.peer = comm, peer
        self.slot = comm.host_pool.slots.take()
        self.peer_slot = _exchange_slot(comm, peer, self.slot, 1, "host-to-device semaphore")
        self._device_expected = comm.device_pool.slots.take()

    def signal(self) -> None:
        """Add one to the peer's inbound token from this host."""
        words = self.comm.peer_pools[self.peer].host_words
        words[self.peer_slot] += np.uint64(1)

    def device_handle(self) -> SemaphoreHandle:
        """Plain data for a kernel of this rank to wait on the peer host's signals."""
        c = self.comm
        inbound = c.host_pool.device_inbound(self.slot)
        return SemaphoreHandle(inbound, inbound, c.device_pool.expected_counter(self._device_expected),
                               c.error_area, c.abort_word, np.int64(c.rank), np.int64(self.peer), np.int64(self.slot),
                               np.uint64(c.timeout_ns))


class Host2HostSemaphore:
    """A semaphore between the host threads of two ranks on one host."""

    def __init__(self, comm, peer: int):
        comm.check_peer(peer, same_host=True)
        self.comm, self.peer = comm, peer
        self.slot = comm.host_pool.slots.take()
        self.peer_slot = _exchange_slot(comm, peer, self.slot, 1, "host-to-host semaphore")

    def signal(self) -> None:
        """Add one to the peer's inbound token."""
        self.comm.peer_pools[self.peer].host_words[self.peer_slot] += np.uint64(1)

    def poll(self) -> bool:
        """True (and the expectation advanced) if the next signal arrived."""
        pool = self.comm.host_pool
        want = pool.expected[self.slot] + np.uint64(1)
        if pool.words[self.slot] >= want:
            pool.expected[self.slot] = want
            return True
        return False

    def wait(self, timeout: float | None = None) -> None:
        """Block until the next signal; CommTimeoutError naming rank and peer past the budget."""
        budget = self.comm.timeout_s if timeout is None else timeout
        deadline = Deadline(budget)
        pause = 1e-6
        while not self.poll():
            if deadline.expired():
                pool = self.comm.host_pool
                raise CommTimeoutError(
                    f"rank {self.comm.rank}: host semaphore wait on peer {self.peer} (slot {self.slot}) timed out "
                    f"after {budget} s: expected {int(pool.expected[self.slot]) + 1}, saw {int(pool.words[self.slot])}")
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)
