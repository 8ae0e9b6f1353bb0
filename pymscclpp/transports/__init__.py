"""Transports a PortChannel's proxy moves bytes with, and the choice of one per peer.

Same host: CudaIpc (copy engine over NVLink/PCIe). Other host: IB (RDMA through pyverbs) when an
RDMA device is usable, else Ethernet (TCP through host staging). PYMSCCLPP_TRANSPORT, the
communicator's ``transport`` or the ProxyService's ``transport`` argument forces one.
"""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple

from .. import config
from ..errors import InvalidUsageError, ProxyError

TRANSPORT_ENV = "PYMSCCLPP_TRANSPORT"


class Transport(enum.IntEnum):
    """How bytes reach a peer: MSCCL++'s CudaIpc, Ethernet and IB."""
    CUDA_IPC = 1
    ETHERNET = 2
    IB = 3


_NAMES = {"cuda_ipc": Transport.CUDA_IPC, "cudaipc": Transport.CUDA_IPC, "ipc": Transport.CUDA_IPC,
          "ethernet": Transport.ETHERNET, "eth": Transport.ETHERNET, "tcp": Transport.ETHERNET,
          "ib": Transport.IB, "rdma": Transport.IB}


def parse(value) -> Transport | None:
    """A Transport from a Transport, a name (cuda_ipc, ethernet, ib) or None/"auto" (no preference)."""
    if value is None or isinstance(value, Transport):
        return value
    text = str(value).strip().lower()
    if text in ("", "auto"):
        return None
    if text not in _NAMES:
        raise InvalidUsageError(f"transport {value!r}: expected auto, cuda_ipc, ethernet or ib")
    return _NAMES[text]


def forced(*overrides) -> Transport | None:
    """The first explicit choice among ``overrides`` (e.g. service argument, communicator), else the env var."""
    for value in overrides:
        choice = parse(value)
        if choice is not None:
            return choice
    return parse(config.get(TRANSPORT_ENV))


class Offer(NamedTuple):
    """What one side of a pair proposes: its choice, whether it was forced, whether it can do IB."""
    choice: Transport
    forced: bool
    ib_ok: bool


_OFFER = struct.Struct("!BBB")


def pack_offer(offer: Offer) -> bytes:
    return _OFFER.pack(offer.choice, offer.forced, offer.ib_ok)


def unpack_offer(data: bytes) -> Offer:
    """Inverse of ``pack_offer``; malformed bytes raise ProxyError."""
    if len(data) != _OFFER.size:
        raise ProxyError(f"transport offer of {len(data)} bytes, expected {_OFFER.size}")
    choice, was_forced, ib_ok = _OFFER.unpack(data)
    if choice not in Transport._value2member_map_ or was_forced > 1 or ib_ok > 1:
        raise ProxyError(f"malformed transport offer {data.hex()}")
    return Offer(Transport(choice), bool(was_forced), bool(ib_ok))


def propose(same_host: bool, ib_problem: str | None, choice: Transport | None) -> Offer:
    """This side's offer for a peer; a forced choice that cannot work here raises naming the reason."""
    if choice is None:
        auto = Transport.CUDA_IPC if same_host else (Transport.IB if ib_problem is None else Transport.ETHERNET)
        return Offer(auto, False, ib_problem is None)
    if choice == Transport.CUDA_IPC and not same_host:
        raise InvalidUsageError("transport cuda_ipc was forced, but the peer is on another host "
                                "(use ethernet or ib, or PYMSCCLPP_TRANSPORT=auto)")
    if choice == Transport.IB and ib_problem is not None:
        raise InvalidUsageError(f"transport ib was forced, but {ib_problem}; "
                                f"use {TRANSPORT_ENV}=ethernet (or auto) to fall back to Ethernet")
    return Offer(choice, True, ib_problem is None)


def negotiate(mine: Offer, theirs: Offer) -> Transport:
    """The transport both sides of a pair use (the same answer on both); ProxyError if they cannot agree."""
    if mine.choice == theirs.choice:
        return mine.choice
    if mine.forced and theirs.forced:
        raise ProxyError(f"the two ranks forced different transports ({mine.choice.name} and {theirs.choice.name})")
    if mine.forced or theirs.forced:
        want, other = (mine, theirs) if mine.forced else (theirs, mine)
        if want.choice == Transport.IB and not other.ib_ok:
            raise ProxyError("transport ib was forced on one rank, but its peer has no usable RDMA device")
        if want.choice == Transport.CUDA_IPC and other.choice != Transport.CUDA_IPC:
            raise ProxyError("transport cuda_ipc was forced on one rank, but its peer is on another host")
        return want.choice
    return Transport.ETHERNET  # other host, and only one side can do IB
