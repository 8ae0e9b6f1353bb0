"""Bootstrap: small byte messages between ranks during setup (memory handles, barriers).

``TcpBootstrap`` (root rendezvous + full mesh) and ``MpiBootstrap`` (mpi4py, pickle-free) share the
``Bootstrap`` interface. ``local.LocalBootstrap`` (ranks as threads) is not exported: see its module for why;
for several ranks in a test use ``pymscclpp.testing`` (rank processes).
"""

from .base import Bootstrap
from .mpi import MpiBootstrap
from .tcp import TcpBootstrap, UniqueId, get_unique_id

__all__ = ["Bootstrap", "MpiBootstrap", "TcpBootstrap", "UniqueId", "get_unique_id"]
