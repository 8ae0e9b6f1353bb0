"""The calls a Communicator remembers, so that an eager call repeated on the same buffers skips its checks and
its selection. A call is found by the identity of its buffer objects, held by weak reference, and checked
against each buffer's cheap state: a torch tensor's address, size, dtype and contiguity (in-place ops change
them), a DeviceView never changes. A remembered call keeps no buffer alive unless its algorithm's launch reads
the buffer objects themselves (``Algorithm.launch_reads_buffers``: plans, user kernels).
"""

from __future__ import annotations

import weakref

from ..runtime.buffers import DeviceView
from .algorithm import Algorithm, Call

MAX_CALLS = 64  # calls remembered per communicator, the oldest forgotten first


def torch_state(buf) -> tuple:
    """(address, elements, dtype, contiguous) of a torch tensor."""
    return buf.data_ptr(), buf.numel(), buf.dtype, buf.is_contiguous()


def _no_state(buf) -> None:
    return None


def _dead() -> None:  # the reference of an absent buffer (None)
    return None


def state_of(buf):
    """How a repeat checks ``buf`` is unchanged: for a torch tensor, a DeviceView or None; else None (a call on
    other buffers is checked in full every time)."""
    if buf is None or type(buf) is DeviceView:
        return _no_state
    return torch_state if type(buf).__module__.split(".")[0] == "torch" else None


class RepeatCache:
    """Key -> the algorithm and Call a checked call was served by, with what its repeat needs (``extra``)."""

    def __init__(self):
        self._calls: dict[tuple, list] = {}

    def remember(self, key: tuple, sendbuf, recvbuf, algorithm: Algorithm, call: Call, extra=None) -> None:
        """Remember the call just launched as ``key``, if its buffers have a cheap state."""
        states = (state_of(sendbuf), state_of(recvbuf))
        if states[0] is None or states[1] is None:
            return
        if not algorithm.launch_reads_buffers:
            call = call._replace(sendbuf=None, recvbuf=None)
        refs = tuple(_dead if b is None else weakref.ref(b) for b in (sendbuf, recvbuf))
        if len(self._calls) >= MAX_CALLS and key not in self._calls:
            del self._calls[next(iter(self._calls))]
        self._calls[key] = [refs, states, (states[0](sendbuf), states[1](recvbuf)), algorithm, call, extra]

    def find(self, key: tuple, sendbuf, recvbuf) -> list | None:
        """``[refs, state checks, states, algorithm, call, extra]`` of the call remembered as ``key`` when it was
        made on these very buffers, unchanged since; else None. Its call may be replaced (a new stream)."""
        hit = self._calls.get(key)
        if hit is None:
            return None
        (send_ref, recv_ref), (send_state, recv_state), states = hit[0], hit[1], hit[2]
        if send_ref() is not sendbuf or recv_ref() is not recvbuf or send_state(sendbuf) != states[0] or \
                recv_state(recvbuf) != states[1]:
            return None
        return hit

    def clear(self) -> None:
        self._calls.clear()

    def __len__(self) -> int:
        return len(self._calls)
