"""All-to-all with per-peer element counts as the Communicator serves it: every rank's counts traded and checked
on every rank before any data moves, then one exchange launch, zero-copy where every rank's send buffer starts a
registration (or every rank captures the call).
"""

from __future__ import annotations

import numbers
import zlib

from .. import config
from ..errors import InvalidUsageError
from ..runtime.buffers import BufferInfo, buffer_info, stream_handle
from .exchange import descriptor, layout, zero_copy_code
from .verb_calls import (INT64, call_buffer, captured_zero_copy, exchange_call, itemsize, launch_reading,
                         one_host, overlap, run)
from .windows import Window, Windows


def _counts(what: str, counts, info: BufferInfo, nranks: int) -> list[int]:
    """Per-peer element counts (None: the buffer split evenly), checked against the buffer."""
    if counts is None:
        if info.count % nranks:
            raise InvalidUsageError(f"all_to_all: {what} is None and the buffer of {info.count} elements does not "
                                    f"split into {nranks} equal slots")
        return [info.count // nranks] * nranks
    counts = list(counts)
    if len(counts) != nranks or any(not isinstance(c, numbers.Integral) or isinstance(c, bool) or c < 0
                                    for c in counts):
        raise InvalidUsageError(f"all_to_all: {what} must be {nranks} non-negative integers, got {counts!r}")
    if sum(counts) > info.count:
        raise InvalidUsageError(f"all_to_all: {what} add up to {sum(counts)} elements, the buffer holds "
                                f"{info.count}")
    return [int(c) for c in counts]


def _agreed_counts(comm, send_counts: list[int], recv_counts: list[int], dtype: str,
                   zero_copy: tuple[int, int]) -> list[tuple]:
    """Trade every rank's counts (and ``zero_copy``: its send buffer's window serial or -1, and whether its call is
    being captured) over the bootstrap and raise the same InvalidUsageError on every rank unless rank i sends rank
    j what j receives from i (and the dtypes agree); every rank's (dtype, send counts, receive counts, zero_copy)."""
    extra = tuple(zero_copy)
    blob = dtype.encode().ljust(16, b"\0") + b"".join(INT64.pack(c) for c in send_counts + recv_counts + list(extra))
    rows = comm.bootstrap.all_gather(blob, timeout=comm.timeout_s, what="every rank's all_to_all counts")
    n = comm.size
    words = 2 * n + len(extra)
    table = []
    for peer, row in enumerate(rows):
        if len(row) != 16 + words * INT64.size:
            raise InvalidUsageError(f"all_to_all: rank {peer} sent {len(row)} bytes of counts, expected "
                                    f"{16 + words * INT64.size}")
        values = [INT64.unpack_from(row, 16 + i * INT64.size)[0] for i in range(words)]
        table.append((row[:16].rstrip(b"\0").decode(errors="replace"), values[:n], values[n:2 * n],
                      tuple(values[2 * n:])))
    for i, (dt_i, send_i, _, _) in enumerate(table):
        for j, (dt_j, _, recv_j, _) in enumerate(table):
            if send_i[j] != recv_j[i] or dt_i != dt_j:
                raise InvalidUsageError(f"all_to_all with counts: rank {i} sends rank {j} {send_i[j]} {dt_i}, rank "
                                        f"{j} receives {recv_j[i]} {dt_j} from rank {i}: the ranks' counts do not "
                                        "match (checked on every rank before any data moved)")
    return table


def _zero_copy_key(comm, send: BufferInfo, stream: int) -> tuple[int, int]:
    """(the serial of the registered window ``send`` starts at, or -1; 1 if ``stream`` is being captured and
    captured calls run zero-copy, else 0): what every rank trades to choose a zero-copy all-to-all together."""
    if not one_host(comm):
        return -1, 0
    window = comm.extension("windows", Windows).find(send.ptr, send.nbytes)
    return (-1 if window is None else window.serial), int(captured_zero_copy(stream))


def _zero_copy_window(comm, send: BufferInfo, keys: list[tuple]) -> Window | None:
    """The window of this rank's send buffer every rank's zero-copy all-to-all reads (``keys``, every rank's
    ``_zero_copy_key``): a registration every rank's send buffer starts at, or the send buffers of a call every
    rank captures, mapped now; None: the call stages."""
    windows = comm.extension("windows", Windows)
    serials = {serial for serial, _ in keys}
    if len(serials) == 1 and min(serials) >= 0:
        return windows.find(send.ptr, send.nbytes)
    if all(captured for _, captured in keys):
        return windows.capture("all_to_all", [(call_buffer(send), send.nbytes)])[0]
    return None


def _call_shape(table: list[tuple], itemsize: int) -> tuple[int, int, int]:
    """(the most bytes any rank sends, the most any rank sends one peer, a digest of every rank's send counts, 1 to
    2047): the same on every rank (``table``, every rank's counts), so every rank selects alike, one-meeting kernels
    compare one fingerprint (its root field) and take as many rounds as the largest range needs."""
    counts = b"".join(INT64.pack(c) for row in table for c in row[1])
    return (max(sum(row[1]) for row in table) * itemsize, max(max(row[1]) for row in table) * itemsize,
            zlib.crc32(counts) % 2047 + 1)


def all_to_allv(comm, sendbuf, recvbuf, send_counts, recv_counts, stream, algo) -> None:
    """``all_to_all`` with per-peer element counts: ``send_counts[p]`` elements from offset ``sum(send_counts[:p])``
    go to rank p, landing at its offset ``sum(recv_counts[:rank])``."""
    if recvbuf is None:
        raise InvalidUsageError("all_to_all with counts: a receive buffer is required (it cannot run in place)")
    send, recv = buffer_info(sendbuf, comm.device), buffer_info(recvbuf, comm.device)
    if send.dtype != recv.dtype:
        raise InvalidUsageError(f"all_to_all: send buffer is {send.dtype} but receive buffer is {recv.dtype}")
    if overlap(send, recv):
        raise InvalidUsageError("all_to_all with counts: send and receive buffers overlap (it cannot run in place)")
    n, size = comm.size, itemsize(send)
    sc, rc = _counts("send_counts", send_counts, send, n), _counts("recv_counts", recv_counts, recv, n)
    if sc[comm.rank] != rc[comm.rank]:
        raise InvalidUsageError(f"all_to_all: rank {comm.rank} sends itself {sc[comm.rank]} elements but receives "
                                f"{rc[comm.rank]} from itself")
    check = config.get("PYMSCCLPP_CHECK")
    comm.raise_if_failed()
    handle = stream_handle(stream, sendbuf, comm.device)
    table = _agreed_counts(comm, sc, rc, send.dtype, _zero_copy_key(comm, send, handle)) if check and n > 1 else None
    moved = sum(sum(row[1]) for row in table) if table else sum(sc) + sum(rc)
    if moved == 0:
        return
    window = _zero_copy_window(comm, send, [row[3] for row in table]) if table else None
    sends = {p: (sum(sc[:p]) * size, sc[p] * size) for p in range(n)}
    recvs = {p: (sum(rc[:p]) * size, rc[p] * size) for p in range(n)}
    descriptors = {p: (descriptor("all_to_allv", sc[p] * size, send.dtype),
                       descriptor("all_to_allv", rc[p] * size, send.dtype)) for p in range(n)} if check else None
    nbytes, largest, digest = _call_shape(table, size) if table else (send.nbytes, send.nbytes, 0)
    if window is None:
        run(comm, "all_to_allv", send, sendbuf, recv, recvbuf, sends, recvs, descriptors, nbytes, send.dtype,
            "sum", digest, handle, algo, peer_bytes=largest)
        return
    call = exchange_call(comm, "all_to_allv", send, recv, layout(n, sends, recvs, descriptors), nbytes,
                         send.dtype, "sum", digest, handle, peer_bytes=largest)
    r, code = comm.rank, zero_copy_code(window)  # every pair reads zero-copy, from where its data starts in the peer
    codes = {p: (code if sc[p] else 0, code if rc[p] else 0, sum(table[p][1][:r]) * size) for p in range(n) if p != r}
    launch_reading(comm, call, algo, sends, recvs, descriptors, window, codes)
