"""What every verb call shares (``send_recv``, ``all_to_allv``, ``rooted``): checks of ranks and buffers, copies on
the call's stream, and the launch of its exchange table by the algorithm the communicator's collection picks
(zero-copy where pairs read peers' buffers).
"""

from __future__ import annotations

import dataclasses
import numbers
import struct

from .. import config
from ..errors import InvalidUsageError
from ..runtime.backend import IS_SIM
from ..runtime.buffers import BufferInfo
from ..runtime.capture import capturing
from ..runtime.fingerprint import DTYPES
from .algorithm import Call, CallBuffer
from .exchange import layout
from .windows import Window

INT64 = struct.Struct("<q")  # the packed form of the sizes and counts the verbs digest and trade


def check_rank(comm, what: str, name: str, value) -> int:
    """``value`` (the call's ``name``: peer, root) as a rank of ``comm``, else InvalidUsageError naming the call."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or not 0 <= value < comm.size:
        raise InvalidUsageError(f"{what}: {name} must be a rank in [0, {comm.size}), got {value!r}")
    return int(value)


def itemsize(info: BufferInfo) -> int:
    """Bytes per element of a checked buffer (an empty one's from its dtype name)."""
    return info.nbytes // info.count if info.count else DTYPES.get(info.dtype, 1)


def overlap(a: BufferInfo, b: BufferInfo) -> bool:
    """Whether two checked buffers share a byte."""
    return a.nbytes > 0 and b.nbytes > 0 and a.ptr < b.ptr + b.nbytes and b.ptr < a.ptr + a.nbytes


def copy(dst: CallBuffer, dst_off: int, src: CallBuffer, src_off: int, nbytes: int, stream: int) -> None:
    """Copy ``nbytes`` between buffers as Calls hold them, on ``stream`` (capturable on GPUs)."""
    if nbytes == 0:
        return
    if IS_SIM:
        dst.array[dst_off:dst_off + nbytes].copy_to_device(src.array[src_off:src_off + nbytes])
        return
    from ..runtime.launch import copy_async
    copy_async(dst.ptr + dst_off, src.ptr + src_off, nbytes, stream)


def call_buffer(info: BufferInfo) -> CallBuffer:
    """A checked buffer as a Call holds it."""
    return CallBuffer(info.ptr, info.array)


def one_host(comm) -> bool:
    """Whether every rank is on this host (only there are peers' buffers mapped)."""
    return len(set(comm.host_ids)) == 1


def captured_zero_copy(stream: int) -> bool:
    """Whether a call on ``stream`` is being captured and captured calls read peers' buffers zero-copy (every rank
    maps the buffers it captures, as with the collectives)."""
    return bool(config.get("PYMSCCLPP_GRAPH_ZERO_COPY")) and capturing(stream)


def launch(comm, call: Call, algo: str | None = None, zero_copy_call: Call | None = None) -> None:
    """Launch ``call`` by the collection's choice (or ``algo``), or ``zero_copy_call`` (the same call reading
    peers' send buffers) when that choice runs it zero-copy (``runs_zero_copy``: the one-host exchange, pair by
    pair, or a zero-copy algorithm the selection's zero-copy rows pick; every rank chooses alike); under the
    simulator its failure raises here."""
    comm.raise_if_failed()
    algorithm = comm.algorithms.select(call if zero_copy_call is None else zero_copy_call, algo)
    reads = zero_copy_call is not None and algorithm.runs_zero_copy(zero_copy_call)
    algorithm.launch(zero_copy_call if reads else call)
    if IS_SIM:
        comm.check_device_errors()


def exchange_call(comm, collective, send, recv, table, size, dtype, op, root, stream,
                  peer_bytes: int | None = None) -> Call:
    """The exchange call of ``table`` between ``send`` and ``recv`` (None: nothing on that side) of message
    ``size``; ``peer_bytes``: the most one rank sends one peer, where that differs (all-to-all with counts)."""
    s = CallBuffer(None) if send is None else call_buffer(send)
    r = CallBuffer(None) if recv is None else call_buffer(recv)
    return Call(collective=collective, sendbuf=None, recvbuf=None, send=s, recv=r,
                peer_bytes=size if peer_bytes is None else peer_bytes,
                message_bytes=size, dtype=dtype, op=op, root=root, stream=stream, in_place=False, layout=table)


def run(comm, collective, send, sendbuf, recv, recvbuf, sends, recvs, descriptors, size, dtype, op, root, stream,
        algo, zero_copy: tuple[Window, dict] | None = None, peer_bytes: int | None = None) -> None:
    """Launch an exchange collective (one rank: its own range copied); ``zero_copy``: (the window the call reads
    peers' buffers through, its pair codes), for the call the exchange runs (``exchange.layout``); ``peer_bytes``
    as ``exchange_call`` takes it."""
    if comm.size == 1:
        (s_off, n), (r_off, _) = sends[0], recvs[0]
        copy(call_buffer(recv), r_off, call_buffer(send), s_off, n, stream)
        return
    call = exchange_call(comm, collective, send, recv, layout(comm.size, sends, recvs, descriptors), size, dtype, op,
                         root, stream, peer_bytes)
    window, codes = zero_copy if zero_copy is not None else (None, {})
    launch_reading(comm, call, algo, sends, recvs, descriptors, window, codes)


def launch_reading(comm, call: Call, algo: str | None, sends: dict, recvs: dict, descriptors: dict | None,
                   window: Window | None, codes: dict) -> None:
    """Launch ``call``, or, with ``window``, the same call whose table carries ``codes`` (a rank to its send code,
    read code and peer offset), reading peers' buffers through the window where the chosen algorithm runs it
    zero-copy: selection sees that call whatever this rank's own pairs carry, so ranks that share a window select
    alike (a rank that trades nothing with a peer as well)."""
    if window is None:
        launch(comm, call, algo)
        return
    launch(comm, call, algo, dataclasses.replace(call, layout=layout(comm.size, sends, recvs, descriptors, codes),
                                                 window=window))
