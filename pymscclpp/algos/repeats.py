"""The calls a Communicator remembers, so that an eager call repeated on the same buffers skips its checks and
its selection. A call is found by the identity of its buffer objects, held by weak reference, and checked
against each buffer's cheap state: a torch tensor's address, size, dtype and contiguity (in-place ops change
them), a DeviceView never changes. A remembered call keeps no buffer alive unless its algorithm's launch reads
the buffer objects themselves (``Algorithm.launch_reads_buffers``: plans, user kernels). A call whose launch
reads addresses only is also found by its tensors' states, so new tensor objects at the same addresses (views,
or the caching allocator handing the same memory out again) repeat it too.
"""

from __future__ import annotations

import dataclasses
import weakref

from ..runtime.buffers import DeviceView
from .algorithm import Call

MAX_CALLS = 64  # calls remembered by their buffer objects, the oldest forgotten first
MAX_ADDRESSES = 1024  # calls remembered by addresses (they hold no buffer): more than a model's calls per step


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


def _address_key(key: tuple, sendbuf, recvbuf) -> tuple | None:
    """``key`` with its buffer identities replaced by the tensors' states; None unless both are torch tensors
    (or the receive buffer is None)."""
    if state_of(sendbuf) is not torch_state:
        return None
    if recvbuf is None:
        return (key[0], torch_state(sendbuf), None) + key[3:]
    if state_of(recvbuf) is not torch_state:
        return None
    return (key[0], torch_state(sendbuf), torch_state(recvbuf)) + key[3:]


class Remembered:
    """One remembered call: its ``collection.Choice`` of algorithm, its Call (``call`` may be replaced: a new stream) and
    ``current_stream(device)``, the stream a repeat with no stream runs on, chosen in the collection's
    ``generation``."""

    __slots__ = ("refs", "checks", "states", "choice", "call", "current_stream", "generation")

    def __init__(self, refs, checks, states, choice: tuple, call: Call, current_stream, generation: int):
        self.refs, self.checks, self.states = refs, checks, states
        self.choice, self.call, self.current_stream, self.generation = choice, call, current_stream, generation


def _put(table: dict, key: tuple, entry: Remembered, limit: int) -> None:
    if len(table) >= limit and key not in table:
        del table[next(iter(table))]
    table[key] = entry


class RepeatCache:
    """Key (collective, buffer identities, op, algorithm name, root) -> the call a checked call was served by;
    forgotten once ``collection`` (an AlgorithmCollection) registers another algorithm."""

    def __init__(self, collection):
        self._collection = collection
        self._by_object: dict[tuple, Remembered] = {}
        self._by_address: dict[tuple, Remembered] = {}

    def remember(self, key: tuple, sendbuf, recvbuf, choice: tuple, call: Call, current_stream=None) -> None:
        """Remember the call just launched as ``key`` with its ``choice`` (``collection.Choice``), if its buffers
        have a cheap state."""
        checks = (state_of(sendbuf), state_of(recvbuf))
        if checks[0] is None or checks[1] is None:
            return
        by_address = not any(a.launch_reads_buffers for a in choice if a is not None)
        dropped = {"sendbuf": None, "recvbuf": None} if by_address else {}  # keep no buffer alive
        call = dataclasses.replace(call, kept=True, **dropped)
        refs = tuple(_dead if b is None else weakref.ref(b) for b in (sendbuf, recvbuf))
        entry = Remembered(refs, checks, (checks[0](sendbuf), checks[1](recvbuf)), choice, call, current_stream,
                           self._collection.generation)
        _put(self._by_object, key, entry, MAX_CALLS)
        address = _address_key(key, sendbuf, recvbuf) if by_address else None
        if address is not None:
            _put(self._by_address, address, entry, MAX_ADDRESSES)

    def find(self, key: tuple, sendbuf, recvbuf) -> Remembered | None:
        """The call remembered as ``key`` on these very buffers, unchanged since, or else on tensors at the same
        addresses when its launch reads addresses only; None if there is none."""
        entry = self._by_object.get(key)
        if entry is not None:
            send_ref, recv_ref = entry.refs
            send_check, recv_check = entry.checks
            if send_ref() is sendbuf and recv_ref() is recvbuf and send_check(sendbuf) == entry.states[0] and \
                    recv_check(recvbuf) == entry.states[1]:
                return entry if entry.generation == self._collection.generation else None
        address = _address_key(key, sendbuf, recvbuf)
        entry = None if address is None else self._by_address.get(address)
        return entry if entry is not None and entry.generation == self._collection.generation else None

    def __len__(self) -> int:
        return len(self._by_object)
