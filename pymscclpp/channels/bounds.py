"""Byte-range checks of memory-channel copies, under the simulator only: an offset or size past a registered
buffer raises ``InvalidUsageError`` naming the channel's peer, the op, the offset, the size and the buffer with its
size (the simulator would give a bare IndexError, or none). On the GPU ``check`` is an empty device function
the compiler drops: no cost."""

from __future__ import annotations

from numba import cuda

from ..errors import InvalidUsageError
from ..runtime.backend import IS_SIM

# the op codes channel functions pass, and their names
PUT, GET, READ, WRITE, PUT_PACKETS, UNPACK_PACKETS, PUT_PACKETS_LL8, UNPACK_PACKETS_LL8 = range(8)
OPS = ("put", "get", "read", "write", "put_packets", "unpack_packets", "put_packets_ll8", "unpack_packets_ll8")
# which buffer: the channel's three, or a local array the op was given
SRC, DST, PKT, LOCAL = range(4)
BUFFERS = ("this rank's src buffer", "the peer's inbox (dst)", "this rank's inbox (pkt)", "the local array given")

if IS_SIM:
    def check(ch, op, which, buf, offset, nbytes):
        """Raise unless bytes ``[offset, offset + nbytes)`` lie in ``buf`` (buffer ``which`` of op ``op`` on
        channel ``ch``)."""
        size = int(buf.shape[0])
        if offset < 0 or nbytes < 0 or offset + nbytes > size:
            raise InvalidUsageError(
                f"memory channel from rank {int(ch.rank)} to peer {int(ch.peer)}: {OPS[op]} of {int(nbytes)} bytes at "
                f"offset {int(offset)} is outside {BUFFERS[which]} of {size} bytes")
else:
    @cuda.jit(device=True)
    def check(ch, op, which, buf, offset, nbytes):
        """Nothing on the GPU (see the module docstring)."""
