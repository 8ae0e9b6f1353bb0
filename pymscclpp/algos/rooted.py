"""The rooted verbs as the Communicator serves them: gather, scatter and reduce, each checked (the root's buffers
against the others') and launched as one exchange table of the root's ranges, gather and scatter zero-copy where
the buffers peers read start a registration (or the call is captured).
"""

from __future__ import annotations

from ..channels import reduce as red
from .. import config
from ..errors import InvalidUsageError
from ..runtime.buffers import BufferInfo, buffer_info, stream_handle
from .exchange import rooted_descriptors, zero_copy_code
from .verb_calls import call_buffer, captured_zero_copy, check_rank, copy, one_host, overlap, run
from .windows import Window, Windows


def _rooted_window(comm, what: str, mine: BufferInfo, stream: int) -> Window | None:
    """The window a gather or scatter reads peers' buffers (or is read) through: ``mine`` (its send buffer; a
    scatter's receivers: the receive buffer) mapped now when the call is being captured (every rank captures it
    and maps its own, as with the collectives), else the registration ``mine`` starts; None: it stages (so does
    a call with the check off, or across hosts)."""
    if not config.get("PYMSCCLPP_CHECK") or not one_host(comm):
        return None
    windows = comm.extension("windows", Windows)
    if captured_zero_copy(stream):
        return windows.capture(what, [(call_buffer(mine), mine.nbytes)])[0]
    return windows.find(mine.ptr, mine.nbytes)


def _root_slots(comm, what: str, side: str, buf, slot: BufferInfo, root: int) -> BufferInfo:
    """The root's ``side`` buffer of a gather or scatter, checked: ``size`` slots like ``slot`` (the other
    buffer), disjoint from it or, in place, with ``slot`` its slot ``root``."""
    if buf is None:
        raise InvalidUsageError(f"{what}: the root (rank {root}) needs a {side} buffer of {comm.size} x "
                                f"{slot.count} elements")
    info = buffer_info(buf, comm.device)
    if info.dtype != slot.dtype or info.nbytes != comm.size * slot.nbytes:
        raise InvalidUsageError(f"{what}: the root's {side} buffer has {info.count} {info.dtype}, expected "
                                f"{comm.size * slot.count} {slot.dtype} ({comm.size} slots of the other buffer)")
    if overlap(info, slot) and slot.ptr != info.ptr + root * slot.nbytes:
        raise InvalidUsageError(f"{what}: send and receive buffers overlap; in place, pass slot {root} of the "
                                f"{side} buffer")
    return info


def gather(comm, sendbuf, recvbuf, root, stream, algo) -> None:
    """Rank r's ``sendbuf`` lands in slot r of the root's ``recvbuf`` (``size`` slots; only the root's is read, the
    others may pass None)."""
    root = check_rank(comm, "gather", "root", root)
    send = buffer_info(sendbuf, comm.device)
    recv = _root_slots(comm, "gather", "receive", recvbuf, send, root) if comm.rank == root else None
    comm.raise_if_failed()
    if send.nbytes == 0:
        return
    n, stream = send.nbytes, stream_handle(stream, sendbuf, comm.device)
    sends = {root: (0, n)}  # at the root: its own slot, copied
    recvs = {p: (p * n, n) for p in range(comm.size)} if comm.rank == root else {}
    window = _rooted_window(comm, "gather", send, stream) if comm.size > 1 else None
    zero_copy = None
    if window is not None:  # the root reads every rank's send buffer where it starts the root's registration
        code = zero_copy_code(window)
        zero_copy = window, ({p: (0, code, 0) for p in range(comm.size) if p != root} if comm.rank == root else
                             {root: (code, 0, 0)})
    run(comm, "gather", send, sendbuf, recv, recvbuf, sends, recvs,
        rooted_descriptors(comm.size, comm.rank, "gather", n, send.dtype, root), n * comm.size, send.dtype,
        "sum", root, stream, algo, zero_copy)


def scatter(comm, sendbuf, recvbuf, root, stream, algo) -> None:
    """Slot r of the root's ``sendbuf`` (``size`` slots) lands in rank r's ``recvbuf`` (only the root's
    ``sendbuf`` is read, the others may pass None)."""
    root = check_rank(comm, "scatter", "root", root)
    if recvbuf is None:
        raise InvalidUsageError("scatter: every rank needs a receive buffer")
    recv = buffer_info(recvbuf, comm.device)
    send = _root_slots(comm, "scatter", "send", sendbuf, recv, root) if comm.rank == root else None
    comm.raise_if_failed()
    if recv.nbytes == 0:
        return
    n, stream = recv.nbytes, stream_handle(stream, recvbuf, comm.device)
    sends = {p: (p * n, n) for p in range(comm.size)} if comm.rank == root else {}
    recvs = {root: (0, n)}  # at the root: its own slot, copied
    me = comm.rank
    window = _rooted_window(comm, "scatter", send if me == root else recv, stream) if comm.size > 1 else None
    zero_copy = None
    if window is not None:  # every rank reads its slot of the root's send buffer where the registrations match
        code = zero_copy_code(window)
        zero_copy = window, ({p: (code, 0, 0) for p in range(comm.size) if p != root} if me == root else
                             {root: (0, code, me * n)})
    run(comm, "scatter", send, sendbuf, recv, recvbuf, sends, recvs,
        rooted_descriptors(comm.size, me, "scatter", n, recv.dtype, root), n * comm.size, recv.dtype,
        "sum", root, stream, algo, zero_copy)


def reduce(comm, sendbuf, recvbuf, root, op, stream, algo) -> None:
    """Every rank's ``sendbuf`` reduced with ``op`` in rank order into the root's ``recvbuf`` (None: in place;
    the others' ``recvbuf`` is not read or written and may be None)."""
    root = check_rank(comm, "reduce", "root", root)
    send = buffer_info(sendbuf, comm.device)
    if send.dtype not in red.DTYPE_KINDS or op not in red.OPS:
        why = (f"cannot reduce dtype {send.dtype}: supported are {', '.join(red.DTYPE_KINDS)}"
               if send.dtype not in red.DTYPE_KINDS else f"unknown reduction op {op!r}: supported are "
               f"{', '.join(red.OPS)}")
        raise InvalidUsageError(f"reduce: {why}")
    recv = send
    if comm.rank == root and recvbuf is not None and recvbuf is not sendbuf:
        recv = buffer_info(recvbuf, comm.device)
        if recv.dtype != send.dtype or recv.nbytes != send.nbytes:
            raise InvalidUsageError(f"reduce: the root's receive buffer has {recv.count} {recv.dtype}, expected "
                                    f"{send.count} {send.dtype}")
        if overlap(send, recv) and recv.ptr != send.ptr:
            raise InvalidUsageError("reduce: send and receive buffers overlap; in place, pass the same buffer")
    comm.raise_if_failed()
    if send.nbytes == 0:
        return
    n = send.nbytes
    out = recvbuf if comm.rank == root and recvbuf is not None else sendbuf
    if comm.size == 1:
        copy(call_buffer(recv), 0, call_buffer(send), 0, n, stream_handle(stream, sendbuf, comm.device))
        return
    if comm.rank == root:  # its own row: where its input and output start
        sends, recvs = {root: (0, 0)}, {p: (0, n if p != root else 0) for p in range(comm.size)}
    else:
        sends, recvs = {root: (0, n)}, {}
    run(comm, "reduce", send, sendbuf, recv if comm.rank == root else None, out, sends, recvs,
        rooted_descriptors(comm.size, comm.rank, "reduce", n, send.dtype, root, op), n, send.dtype, op, root,
        stream_handle(stream, sendbuf, comm.device), algo)
