"""All-to-all: the all-gather exchange with a different send slot per peer."""

from __future__ import annotations

from .allgather import AllGather


class AllToAll(AllGather):
    """One-shot all-pairs all-to-all: ``send`` slot j goes to rank j's ``recv`` slot ``rank``."""

    send_all = True
