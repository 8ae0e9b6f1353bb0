"""The call check of a communicator whose ranks span hosts, where no memory is shared for the device check: before
each launch the ranks trade their call's fingerprint over the bootstrap (8 bytes each, unpacked with ``struct``)
and every rank raises the same ``CallMismatchError`` on a disagreement, before anything is launched.

A CUDA graph checks the call it captured (the trade runs at capture), not each replay.
"""

from __future__ import annotations

import struct

from ..errors import CallMismatchError, InvalidUsageError
from .. import config
from ..runtime.fingerprint import mismatch_text
from .area import fingerprint_of

_RECORD = struct.Struct("<Q")  # the fingerprint


class HostCallCheck:
    """Fingerprints traded over ``comm``'s bootstrap per call (``PYMSCCLPP_CHECK=0``: no trade)."""

    def __init__(self, comm):
        self.comm, self.enabled, self.calls = comm, config.get("PYMSCCLPP_CHECK"), 0

    def check(self, call) -> None:
        """Return when every rank makes the same call as this one; else record and raise the mismatch."""
        if not self.enabled:
            return
        self.calls += 1
        ours = fingerprint_of(call, self.comm.size)
        blobs = self.comm.bootstrap.all_gather(_RECORD.pack(ours), timeout=self.comm.timeout_s, what="call records")
        for peer, blob in enumerate(blobs):
            if len(blob) != _RECORD.size:
                raise InvalidUsageError(f"call check: rank {peer} sent {len(blob)} bytes, expected {_RECORD.size}")
            (theirs,) = _RECORD.unpack(blob)
            if theirs != ours:
                exc = CallMismatchError(mismatch_text(self.comm.rank, peer, ours, theirs, self.calls, "host"))
                self.comm.fail(exc)
                raise exc
