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


def _zero_copy(comm, what: str, mine: BufferInfo, root: int, n: int, stream: int) -> tuple[Window, dict] | None:
    """(the window, every pair's codes) of a gather that reads zero-copy (the root reads every rank's send buffer)
    or of a scatter (every rank reads its ``n`` bytes of the root's send buffer), through ``_rooted_window`` of
    ``mine``; None: the call stages."""
    window = _rooted_window(comm, what, mine, stream) if comm.size > 1 else None
    if window is None:
        return None
    code = zero_copy_code(window)
    reads, is_read = (0, code, 0), (code, 0, 0)  # this rank reads the pair's buffer; the pair reads this rank's
    if comm.rank == root:
        return window, {p: reads if what == "gather" else is_read for p in range(comm.size) if p != root}
    return window, {root: is_read if what == "gather" else (0, code, comm.rank * n)}


def _run_rooted(comm, what: str, send: BufferInfo | None, sendbuf, recv: BufferInfo | None, recvbuf,
                slot: BufferInfo, root: int, stream, algo, mine: BufferInfo) -> None:
    """Run a checked gather or scatter of ``slot`` (the buffer of one rank's bytes: a gather's send buffer, a
    scatter's receive buffer): the root's ``size`` slots against every rank's one, its own slot copied; zero-copy
    where ``mine`` (``_zero_copy``) allows."""
    comm.raise_if_failed()
    n = slot.nbytes
    if n == 0:
        return
    stream = stream_handle(stream, sendbuf if what == "gather" else recvbuf, comm.device)
    slots = {p: (p * n, n) for p in range(comm.size)} if comm.rank == root else {}
    own = {root: (0, n)}  # at the root: its own slot, copied
    sends, recvs = (own, slots) if what == "gather" else (slots, own)
    run(comm, what, send, sendbuf, recv, recvbuf, sends, recvs,
        rooted_descriptors(comm.size, comm.rank, what, n, slot.dtype, root), n * comm.size, slot.dtype, "sum", root,
        stream, algo, _zero_copy(comm, what, mine, root, n, stream))


def gather(comm, sendbuf, recvbuf, root, stream, algo) -> None:
    """Rank r's ``sendbuf`` lands in slot r of the root's ``recvbuf`` (``size`` slots; only the root's is read, the
    others may pass None)."""
    root = check_rank(comm, "gather", "root", root)
    send = buffer_info(sendbuf, comm.device)
    recv = _root_slots(comm, "gather", "receive", recvbuf, send, root) if comm.rank == root else None
    _run_rooted(comm, "gather", send, sendbuf, recv, recvbuf, send, root, stream, algo, send)


def scatter(comm, sendbuf, recvbuf, root, stream, algo) -> None:
    """Slot r of the root's ``sendbuf`` (``size`` slots) lands in rank r's ``recvbuf`` (only the root's
    ``sendbuf`` is read, the others may pass None)."""
    root = check_rank(comm, "scatter", "root", root)
    if recvbuf is None:
        raise InvalidUsageError("scatter: every rank needs a receive buffer")
    recv = buffer_info(recvbuf, comm.device)
    send = _root_slots(comm, "scatter", "send", sendbuf, recv, root) if comm.rank == root else None
    _run_rooted(comm, "scatter", send, sendbuf, recv, recvbuf, recv, root, stream, algo,
                send if comm.rank == root else recv)


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
