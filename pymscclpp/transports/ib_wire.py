"""The device-free half of the IB transport: QP-info and memory-region wire formats, the region
table, and the translation of a trigger into RDMA work requests (plain data, unit-tested anywhere)."""

from __future__ import annotations

import struct
from typing import NamedTuple

from ..runtime.fifo import TRIGGER_DATA, TRIGGER_FLAG, Trigger
from ..errors import ProxyError

_QP = struct.Struct("!4sBBHII16sBBBx")  # magic, version, port, lid, qpn, psn, gid, mtu, gid index, is_global
_QP_MAGIC, _QP_VERSION = b"PMQP", 1
_REGION = struct.Struct("!QQII")  # address, length, lkey (sender's own use: 0 on the wire), rkey


class QpInfo(NamedTuple):
    """What a peer needs to connect its RC QP to ours."""
    port: int
    lid: int
    qpn: int
    psn: int
    gid: bytes
    mtu: int
    gid_index: int
    is_global: bool


def pack_qp_info(info: QpInfo) -> bytes:
    return _QP.pack(_QP_MAGIC, _QP_VERSION, info.port, info.lid, info.qpn, info.psn, info.gid, info.mtu,
                    info.gid_index, info.is_global)


def unpack_qp_info(data: bytes) -> QpInfo:
    """Inverse of ``pack_qp_info``; malformed bytes raise ProxyError."""
    if len(data) != _QP.size:
        raise ProxyError(f"QP info of {len(data)} bytes, expected {_QP.size}")
    magic, version, port, lid, qpn, psn, gid, mtu, gid_index, is_global = _QP.unpack(data)
    if magic != _QP_MAGIC or version != _QP_VERSION:
        raise ProxyError("not a pymscclpp QP info record (bad magic or version)")
    if qpn >= 1 << 24 or psn >= 1 << 24 or not 1 <= mtu <= 5 or is_global > 1 or port == 0:
        raise ProxyError(f"malformed QP info: port {port} qpn {qpn} psn {psn} mtu {mtu} is_global {is_global}")
    return QpInfo(port, lid, qpn, psn, gid, mtu, gid_index, bool(is_global))


class Region(NamedTuple):
    """A registered memory region: address, length, local key, remote key."""
    addr: int
    length: int
    lkey: int
    rkey: int


def pack_region(region: Region) -> bytes:
    """The region as a peer sees it (its lkey is of no use remotely and is sent as 0)."""
    return _REGION.pack(region.addr, region.length, 0, region.rkey)


def unpack_region(data: bytes) -> Region:
    if len(data) != _REGION.size:
        raise ProxyError(f"memory region record of {len(data)} bytes, expected {_REGION.size}")
    addr, length, lkey, rkey = _REGION.unpack(data)
    if lkey or addr + length >= 1 << 64:
        raise ProxyError("malformed memory region record")
    return Region(addr, length, 0, rkey)


class RegionTable:
    """Memory regions by proxy memory id, with bounds-checked address translation."""

    def __init__(self):
        self._regions: dict[int, Region] = {}

    def add(self, memory_id: int, region: Region) -> None:
        self._regions[memory_id] = region

    def __contains__(self, memory_id: int) -> bool:
        return memory_id in self._regions

    def get(self, memory_id: int) -> Region:
        if memory_id not in self._regions:
            raise ProxyError(f"memory {memory_id} has no RDMA memory region")
        return self._regions[memory_id]

    def address(self, memory_id: int, offset: int, nbytes: int) -> int:
        """Address of ``[offset, offset + nbytes)`` in region ``memory_id``; ProxyError past its end."""
        region = self.get(memory_id)
        if offset < 0 or nbytes < 0 or offset + nbytes > region.length:
            raise ProxyError(f"{nbytes} bytes at offset {offset} exceed memory {memory_id}'s region of "
                             f"{region.length} bytes")
        return region.addr + offset


class WorkRequest(NamedTuple):
    """One RDMA operation: ``write`` (local -> remote bytes) or ``fetch_add`` (remote u64 += add)."""
    opcode: str
    local_addr: int
    lkey: int
    length: int
    remote_addr: int
    rkey: int
    add: int


def work_requests(t: Trigger, regions: RegionTable, token: Region, scratch: Region) -> list[WorkRequest]:
    """The work requests of trigger ``t`` in posting order: the RDMA WRITE of its data, then the atomic
    fetch-add of the peer's token (``token``; the old value lands in ``scratch``) for a flag."""
    wrs = []
    if t.type & TRIGGER_DATA and t.size:
        src = regions.get(t.src_id)
        wrs.append(WorkRequest("write", regions.address(t.src_id, t.src_offset, t.size), src.lkey, t.size,
                               regions.address(t.dst_id, t.dst_offset, t.size), regions.get(t.dst_id).rkey, 0))
    if t.type & TRIGGER_FLAG:
        wrs.append(WorkRequest("fetch_add", scratch.addr, scratch.lkey, 8, token.addr, token.rkey, 1))
    return wrs
