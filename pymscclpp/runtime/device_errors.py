"""The device error area's layout and its text: where a wait that ran out of budget, or was aborted, records
what it waited for (``channels.device_errors`` writes it; the host turns it into CommTimeoutError), or where the
cross-rank call check found two ranks' calls disagreeing (CallMismatchError).

Layout (int64[ERR_WORDS]): state (1 timed out, 2 aborted, 3 mismatch), op, rank, peer, channel, expected, seen,
block. A mismatch keeps the call's sequence number in ``channel``, this rank's call fingerprint in ``expected``
and ``peer``'s in ``seen`` (``runtime.fingerprint``), and in ``op`` who found it: the call's own kernel
(``OP_CALLCHECK``) or a check kernel launched ahead of a user's kernel (``OP_PRECHECK``); a zero-copy call whose
fingerprints agree but whose buffers are of different registrations keeps the two windows tags instead
(``OP_WINDOWS``, ``fingerprint.windows_tag``). The first failure wins
(compare-and-swap on ``state``).

An abort word (uint64[1] in host memory the device reads) ends every spinning wait on it within
``ABORT_CHECK_EVERY`` spins instead of its budget: the communicator's, set when its liveness monitor
declares a peer dead, and a proxy FIFO's, set when a proxy of the job fails (PortChannel waits).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from .fingerprint import mismatch_text, pair_mismatch_text, windows_mismatch_text

WaitContext = namedtuple("WaitContext", "err abort rank peer channel timeout_ns")
"""What a device wait records its failure with when no channel handle stands for it (channel handles have
the same fields): the error area, the abort word, and the rank, peer, channel and budget to report."""

ERR_WORDS = 8
OP_NAMES = {1: "semaphore wait", 2: "packet wait (unpack_packets)", 3: "fifo push", 4: "flush",
            5: "packet wait (read_packets)", 6: "port channel wait", 7: "call check wait (a peer's call fingerprint)",
            8: "call check wait (a peer's call fingerprint, in the check kernel ahead of a user algorithm)",
            9: "pair check of a send/recv or rooted call (what this rank sends the peer against what it receives)",
            10: "pair check of a send/recv or rooted call (what this rank receives against what the peer sends)",
            11: "pair check wait (the peer's send/recv descriptor: the peer made no matching call)",
            12: "send wait (the receiver to take a chunk out of its staging slot, into its receive buffer)",
            13: "recv wait (the sender's next chunk of its send buffer in our staging slot)",
            14: "send wait (the receiver to finish reading this rank's send buffer, zero-copy)",
            15: "call check of a zero-copy call (the registrations of the buffers it maps on peers)"}
OP_WAIT, OP_PACKET, OP_FIFO_PUSH, OP_FLUSH, OP_READ_PACKET, OP_PROXY_ABORT = 1, 2, 3, 4, 5, 6
OP_CALLCHECK, OP_PRECHECK = 7, 8
OP_PAIR_SEND, OP_PAIR_RECV, OP_PAIR_WAIT, OP_SEND_CREDIT, OP_RECV_DATA, OP_READ_DONE = 9, 10, 11, 12, 13, 14
OP_WINDOWS = 15
TIMED_OUT, ABORTED, MISMATCH = 1, 2, 3
QUIET = 1 << 16  # added to a wait's op code: it gives up as it would but records nothing (its block reports for it)
# waits on this rank's own memory, recorded with these channel codes (executor/device.py): where they waited
LOCAL_WAITS = {-2: " in the executor's barrier of one thread block's threads",
               -3: " in the executor's barrier of a plan's thread blocks",
               -4: " on a plan semaphore (acquire)"}
ABORT_CHECK_EVERY = 64  # spins between reads of the abort word (host memory: a slow read)


def _expected(code: int, peer: int, channel: int, expected: int, seen: int) -> str:
    """What the wait waited for, in words, from its recorded ``expected`` and ``seen`` words."""
    whose = f"peer {peer}'s " if peer >= 0 else ""
    if code in (OP_CALLCHECK, OP_PRECHECK):
        held = "nothing" if seen == 0 else f"call {seen}'s"
        return (f"expected peer {peer}'s fingerprint of call {expected} on this communicator, its slot holds {held}: "
                f"peer {peer} has not made this call")
    if code in (OP_PACKET, OP_READ_PACKET):
        found = "none written yet" if seen == 0 else f"an earlier write's flag {seen}"
        return f"expected {whose}packets of this call (flag {expected}) in this rank's scratch, found {found}"
    if code == OP_WAIT and channel == -2:
        return f"expected the block's other threads at barrier generation {expected}, it stayed {seen}"
    if code == OP_WAIT and channel == -3:
        return f"expected the plan's thread blocks to bring the barrier count to {expected}, it stayed {seen}"
    if code == OP_WAIT and channel == -4:
        return "expected another thread block to release the semaphore, it stayed 0"
    if code == OP_WAIT:
        return f"expected {whose}signal number {expected}, it had signalled {seen} time(s)"
    if code == OP_FIFO_PUSH:
        return f"the proxy's ring stayed full: trigger {expected} could not go in, the proxy had taken {seen}"
    if code in (OP_FLUSH, OP_PROXY_ABORT):
        return f"expected the proxy to have done {expected} trigger(s), it had done {seen}"
    return f"expected {expected}, saw {seen}"


def describe(err: np.ndarray) -> str | None:
    """Human-readable text of a recorded timeout, abort or call mismatch, or None when the area is clear."""
    state, code = int(err[0]), int(err[1])
    if state == 0:
        return None
    if state == MISMATCH and code in (OP_PAIR_SEND, OP_PAIR_RECV):
        return pair_mismatch_text(int(err[2]), int(err[3]), int(err[5]), int(err[6]), code == OP_PAIR_SEND)
    if state == MISMATCH and code == OP_WINDOWS:
        return windows_mismatch_text(int(err[2]), int(err[3]), int(err[5]), int(err[6]), int(err[4]))
    if state == MISMATCH:
        return mismatch_text(int(err[2]), int(err[3]), int(err[5]), int(err[6]), int(err[4]),
                             "ahead" if code == OP_PRECHECK else "kernel")
    op = OP_NAMES.get(code, f"op {code}")
    if state == ABORTED:
        ended = "was aborted by the host (a peer declared dead: PeerDisconnectedError; or a proxy failed: ProxyError)"
    elif code == OP_PROXY_ABORT:
        ended = "was aborted (a proxy failed, see ProxyError)"
    else:
        ended = "timed out"
    peer, channel = int(err[3]), int(err[4])
    where = f" on channel {channel}" if channel >= 0 else LOCAL_WAITS.get(channel, "")
    who = f" with peer {peer}" if peer >= 0 else ""  # a wait on this rank's own memory has no peer
    return (f"rank {int(err[2])}: {op}{where}{who} {ended} in thread block {int(err[7])}: "
            f"{_expected(code, peer, channel, int(err[5]), int(err[6]))}")
