"""Bootstrap: small byte messages between ranks during setup (memory handles, barriers).

``TcpBootstrap`` (root rendezvous + full mesh), ``MpiBootstrap`` (mpi4py, pickle-free) and
``LocalBootstrap`` (ranks as threads) share the ``Bootstrap`` interface.
"""

from .base import Bootstrap
from .local import LocalBootstrap
from .mpi import MpiBootstrap
from .tcp import TcpBootstrap, UniqueId, get_unique_id

__all__ = ["Bootstrap", "LocalBootstrap", "MpiBootstrap", "TcpBootstrap", "UniqueId", "get_unique_id"]
