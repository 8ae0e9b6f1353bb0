"""The numba types of the plain-data handles kernels take, from counts alone (no buffers, no peers): what the
one-shot launches are declared with (``algos.oneshot``) and what ``python -m pymscclpp.precompile`` compiles for.
"""

from __future__ import annotations

from numba.core import types

from .memory import PeerMemory
from .memory_channel import MemoryChannelHandle

BYTES, U32, U64, I64 = (types.Array(t, 1, "C") for t in (types.uint8, types.uint32, types.uint64, types.int64))
WAIT_CONTEXT = (I64, U64, types.int64, types.int64, types.int64, types.uint64)
"""The fields of ``runtime.device_errors.WaitContext`` (every channel handle ends with them): error area, abort
word, rank, peer, channel, budget in ns."""


def memory_channel() -> types.NamedTuple:
    """A ``MemoryChannelHandle``: src, dst and pkt bytes, inbound, outbound and expected tokens, the wait context."""
    return types.NamedTuple([BYTES, BYTES, BYTES, U64, U64, U64, *WAIT_CONTEXT], MemoryChannelHandle)


def peer_memory() -> types.NamedTuple:
    """A ``PeerMemory``: a peer's registered buffer (``dst`` bytes)."""
    return types.NamedUniTuple(BYTES, 1, PeerMemory)
