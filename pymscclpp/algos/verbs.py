"""The verbs that do not move the same bytes between every pair of ranks, as the Communicator serves them: send
and recv (grouped with NCCL's semantics), all-to-all with per-peer counts, gather, scatter and reduce. Each call
is checked here (bad input raises before any launch, on the rank that made it; inconsistent counts of an
all-to-all on every rank), laid out as one exchange table (``exchange.layout``) and launched by the algorithm
the communicator's collection picks for it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import numbers
import struct
import weakref
import zlib
from typing import NamedTuple

from ..channels import reduce as red
from ..errors import InvalidUsageError
from .. import config
from ..runtime.backend import IS_SIM
from ..runtime.buffers import BufferInfo, buffer_info, stream_handle
from ..runtime.capture import capturing
from ..runtime.fingerprint import DTYPES
from ..runtime.memory import alloc
from .algorithm import Call, CallBuffer, device_buffer
from .exchange import Exchange, descriptor, layout, rooted_descriptors, zero_copy_code
from .windows import Window, Windows


_COUNT = struct.Struct("<q")


class PeerOp(NamedTuple):
    """One posted send or recv: ``buf`` checked as ``info``, to or from ``peer``, on CUstream ``stream``."""

    kind: str
    buf: object
    info: BufferInfo
    peer: int
    stream: int


def check_rank(comm, what: str, name: str, value) -> int:
    """``value`` (the call's ``name``: peer, root) as a rank of ``comm``, else InvalidUsageError naming the call."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or not 0 <= value < comm.size:
        raise InvalidUsageError(f"{what}: {name} must be a rank in [0, {comm.size}), got {value!r}")
    return int(value)


def _itemsize(info: BufferInfo) -> int:
    """Bytes per element of a checked buffer (an empty one's from its dtype name)."""
    return info.nbytes // info.count if info.count else DTYPES.get(info.dtype, 1)


def _overlap(a: BufferInfo, b: BufferInfo) -> bool:
    return a.nbytes > 0 and b.nbytes > 0 and a.ptr < b.ptr + b.nbytes and b.ptr < a.ptr + a.nbytes


class Staging:
    """Device buffers a group packs its sends into or unpacks its receives from when it has several, by use; grown
    on demand, every one kept while the communicator lives (a captured CUDA graph may still read an old one)."""

    def __init__(self):
        self._buffers: dict[str, list] = {}

    def get(self, which: str, nbytes: int) -> CallBuffer:
        """A ``which`` staging buffer of at least ``nbytes`` (address and uint8 view), as a Call holds it."""
        kept = self._buffers.setdefault(which, [])
        if not kept or kept[-1].size < nbytes:
            kept.append(alloc(max(nbytes, 2 * kept[-1].size if kept else 1 << 16)))
        return device_buffer(kept[-1])

    def close(self) -> None:
        self._buffers = {}


def staging(comm) -> Staging:
    """The communicator's staging buffers."""
    return comm.extension("exchange-staging", lambda c: Staging())


def _copy(dst: CallBuffer, dst_off: int, src: CallBuffer, src_off: int, nbytes: int, stream: int) -> None:
    """Copy ``nbytes`` between buffers as Calls hold them, on ``stream`` (capturable on GPUs)."""
    if nbytes == 0:
        return
    if IS_SIM:
        dst.array[dst_off:dst_off + nbytes].copy_to_device(src.array[src_off:src_off + nbytes])
        return
    from ..runtime.launch import copy_async
    copy_async(dst.ptr + dst_off, src.ptr + src_off, nbytes, stream)


def _pair(info: BufferInfo) -> CallBuffer:
    """A checked buffer as a Call holds it."""
    return CallBuffer(info.ptr, info.array)


def _moved_by(ops: list[PeerOp]) -> tuple[int, str, int]:
    """(bytes, dtype or ``mixed``/``none``, digest of the op sizes in order) of one direction's ops with one
    peer: the digest (11 bits, never 0 for ops) tells ``[7, 1500]`` from ``[1500, 7]``."""
    dtypes = {o.info.dtype for o in ops}
    dtype = "none" if not ops else dtypes.pop() if len(dtypes) == 1 else "mixed"
    sizes = b"".join(_COUNT.pack(o.info.nbytes) for o in ops)
    return sum(o.info.nbytes for o in ops), dtype, (zlib.crc32(sizes) % 2047 + 1) if ops else 0


class Group:
    """The sends and receives posted since the outermost ``comm.group()`` began, issued together at its end (a
    send or recv outside a group is a group of its own)."""

    def __init__(self, comm):
        # the communicator holds its group: a weak reference, so no cycle keeps a closed one's memory alive
        self.comm, self.depth, self.ops = weakref.proxy(comm), 0, []

    @contextlib.contextmanager
    def scope(self):
        """``with comm.group():`` — nested groups issue at the outermost end; an exception drops the posted ops."""
        self.depth += 1
        try:
            yield
        except BaseException:
            self.depth -= 1
            if self.depth == 0:
                self.ops = []
            raise
        self.depth -= 1
        if self.depth == 0:
            ops, self.ops = self.ops, []
            issue(self.comm, ops)

    def post(self, kind: str, buf, peer, stream) -> None:
        """Check a send or recv now (bad input raises here, before any launch) and post it."""
        what = f"{kind} {'to' if kind == 'send' else 'from'} rank {peer}"
        peer = check_rank(self.comm, kind, "peer", peer)
        info = buffer_info(buf, self.comm.device)
        op = PeerOp(kind, buf, info, peer, stream_handle(stream, buf, self.comm.device))
        if self.ops and op.stream != self.ops[0].stream:
            raise InvalidUsageError(f"{what}: every send and recv of a group must be on one stream")
        self.comm.raise_if_failed()
        if self.depth:
            self.ops.append(op)
        else:
            issue(self.comm, [op])


def _check_self(comm, sends: list[PeerOp], recvs: list[PeerOp]) -> None:
    """A rank's sends to itself must match its receives from itself one by one (count and dtype)."""
    if len(sends) != len(recvs) or any(s.info.nbytes != r.info.nbytes or s.info.dtype != r.info.dtype
                                       for s, r in zip(sends, recvs)):
        mine = [f"{o.info.count} {o.info.dtype}" for o in sends]
        got = [f"{o.info.count} {o.info.dtype}" for o in recvs]
        raise InvalidUsageError(f"rank {comm.rank}: its sends to itself ({mine}) do not match its receives from "
                                f"itself ({got}) one by one")


def issue(comm, ops: list[PeerOp]) -> None:
    """One exchange launch for a group's ``ops`` (nothing when empty): several sends packed into one staging
    buffer (and several receives unpacked from one) around it; one send buffer and one receive go as they are."""
    if not ops:
        return
    rank, stream = comm.rank, ops[0].stream
    recv_ops = [o for o in ops if o.kind == "recv"]
    send_ops = [o for o in ops if o.kind == "send"]
    by_peer = {p: ([o for o in send_ops if o.peer == p], [o for o in recv_ops if o.peer == p])
               for p in sorted({o.peer for o in ops})}
    _check_self(comm, *by_peer.get(rank, ([], [])))
    for i, r in enumerate(recv_ops):
        for o in recv_ops[i + 1:] + send_ops:
            if _overlap(r.info, o.info):
                raise InvalidUsageError(f"recv from rank {r.peer}: its buffer overlaps another buffer of the group "
                                        f"({o.kind} {'to' if o.kind == 'send' else 'from'} rank {o.peer})")
    if set(by_peer) == {rank}:  # only sends to itself: copies, no peer and no lanes (their set-up is collective)
        for s, r in zip(*by_peer[rank]):
            _copy(_pair(r.info), 0, _pair(s.info), 0, s.info.nbytes, stream)
        return
    staged_send = len({(o.info.ptr, o.info.nbytes) for o in send_ops}) > 1 or \
        any(len(s) > 1 for s, _ in by_peer.values())
    staged_recv = len(recv_ops) > 1
    sends, recvs, descriptors = {}, {}, {} if config.get("PYMSCCLPP_CHECK") else None
    send_at = recv_at = 0
    packing, unpacking = [], []
    for p, (s_ops, r_ops) in by_peer.items():
        s_bytes, s_dtype, s_n = _moved_by(s_ops)
        r_bytes, r_dtype, r_n = _moved_by(r_ops)
        if staged_send:
            for o in s_ops:
                packing.append((o, send_at))
                send_at += o.info.nbytes
        sends[p] = (send_at - s_bytes if staged_send else 0, s_bytes)
        if staged_recv:
            for o in r_ops:
                unpacking.append((o, recv_at))
                recv_at += o.info.nbytes
        recvs[p] = (recv_at - r_bytes if staged_recv else 0, r_bytes)
        if descriptors is not None and p != rank:
            descriptors[p] = (descriptor("send_recv", s_bytes, s_dtype, root=s_n),
                              descriptor("send_recv", r_bytes, r_dtype, root=r_n))
    send = recv = CallBuffer(None)
    buffers = staging(comm)
    if staged_send:
        send = buffers.get("send", send_at)
        for o, at in packing:
            _copy(send, at, _pair(o.info), 0, o.info.nbytes, stream)
    elif send_ops:
        send = _pair(send_ops[0].info)
    if staged_recv:
        recv = buffers.get("recv", recv_at)
    elif recv_ops:
        recv = _pair(recv_ops[0].info)
    total = sum(o.info.nbytes for o in ops)
    dtype = ops[0].info.dtype
    call = Call(collective="send_recv", sendbuf=None, recvbuf=None, send=send, recv=recv, peer_bytes=total,
                message_bytes=total, dtype=dtype, op="sum", root=0, stream=stream, in_place=False,
                layout=layout(comm.size, sends, recvs, descriptors))
    sent, window = _pair_windows(comm, None if staged_send or not send_ops else send_ops[0].info,
                                 recv_ops[0].info if len(recv_ops) == 1 else None) \
        if descriptors is not None else (None, None)
    codes = {p: (zero_copy_code(sent) if sent is not None and sends[p][1] else 0,
                 zero_copy_code(window) if window is not None and recvs[p][1] else 0, 0)
             for p in by_peer if p != rank}  # a peer reading ours reads from the start of our send buffer
    _launch_reading(comm, call, None, sends, recvs, descriptors, window, codes)
    for o, at in unpacking:
        _copy(_pair(o.info), 0, recv, at, o.info.nbytes, stream)


def _one_host(comm) -> bool:
    """Whether every rank is on this host (only there are peers' buffers mapped)."""
    return len(set(comm.host_ids)) == 1


def _pair_windows(comm, send: BufferInfo | None, recv: BufferInfo | None) -> tuple[Window | None, Window | None]:
    """(the registered window a send/recv call's one send buffer ``send`` starts, which peers may read from; the
    window this rank reads peers' send buffers through: that one, else the one its one receive buffer ``recv``
    starts): None where the buffer starts none, PYMSCCLPP_SEND_RECV_ZERO_COPY is off or the ranks span hosts.
    Each pair then reads zero-copy exactly where the sender's registration is the receiver's (``exchange_kernels``),
    and stages otherwise."""
    if not config.get("PYMSCCLPP_SEND_RECV_ZERO_COPY") or not _one_host(comm):
        return None, None
    windows = comm.extension("windows", Windows)
    sent = None if send is None else windows.find(send.ptr, send.nbytes)
    return sent, sent if sent is not None else None if recv is None else windows.find(recv.ptr, recv.nbytes)


def launch(comm, call: Call, algo: str | None = None, zero_copy_call: Call | None = None) -> None:
    """Launch ``call`` by the collection's choice (or ``algo``), or ``zero_copy_call`` (the same call reading
    peers' send buffers) when that choice is the one-host exchange, which alone reads them (every rank chooses
    alike); under the simulator its failure raises here."""
    comm.raise_if_failed()
    algorithm = comm.algorithms.select(call, algo)
    algorithm.launch(zero_copy_call if zero_copy_call is not None and isinstance(algorithm, Exchange) else call)
    if IS_SIM:
        comm.check_device_errors()


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
    blob = dtype.encode().ljust(16, b"\0") + b"".join(_COUNT.pack(c) for c in send_counts + recv_counts + list(extra))
    rows = comm.bootstrap.all_gather(blob, timeout=comm.timeout_s, what="every rank's all_to_all counts")
    n = comm.size
    words = 2 * n + len(extra)
    table = []
    for peer, row in enumerate(rows):
        if len(row) != 16 + words * _COUNT.size:
            raise InvalidUsageError(f"all_to_all: rank {peer} sent {len(row)} bytes of counts, expected "
                                    f"{16 + words * _COUNT.size}")
        values = [_COUNT.unpack_from(row, 16 + i * _COUNT.size)[0] for i in range(words)]
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
    if not _one_host(comm):
        return -1, 0
    window = comm.extension("windows", Windows).find(send.ptr, send.nbytes)
    captured = config.get("PYMSCCLPP_GRAPH_ZERO_COPY") and capturing(stream)
    return (-1 if window is None else window.serial), int(bool(captured))


def _zero_copy_window(comm, send: BufferInfo, keys: list[tuple]) -> Window | None:
    """The window of this rank's send buffer every rank's zero-copy all-to-all reads (``keys``, every rank's
    ``_zero_copy_key``): a registration every rank's send buffer starts at, or the send buffers of a call every
    rank captures, mapped now; None: the call stages."""
    windows = comm.extension("windows", Windows)
    serials = {serial for serial, _ in keys}
    if len(serials) == 1 and min(serials) >= 0:
        return windows.find(send.ptr, send.nbytes)
    if all(captured for _, captured in keys):
        return windows.capture("all_to_all", [(_pair(send), send.nbytes)])[0]
    return None


def all_to_allv(comm, sendbuf, recvbuf, send_counts, recv_counts, stream, algo) -> None:
    """``all_to_all`` with per-peer element counts: ``send_counts[p]`` elements from offset ``sum(send_counts[:p])``
    go to rank p, landing at its offset ``sum(recv_counts[:rank])``."""
    if recvbuf is None:
        raise InvalidUsageError("all_to_all with counts: a receive buffer is required (it cannot run in place)")
    send, recv = buffer_info(sendbuf, comm.device), buffer_info(recvbuf, comm.device)
    if send.dtype != recv.dtype:
        raise InvalidUsageError(f"all_to_all: send buffer is {send.dtype} but receive buffer is {recv.dtype}")
    if _overlap(send, recv):
        raise InvalidUsageError("all_to_all with counts: send and receive buffers overlap (it cannot run in place)")
    n, size = comm.size, _itemsize(send)
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
    if window is None:
        _run(comm, "all_to_allv", send, sendbuf, recv, recvbuf, sends, recvs, descriptors, send.nbytes, send.dtype,
             "sum", 0, handle, algo)
        return
    call = _call(comm, "all_to_allv", send, recv, layout(n, sends, recvs, descriptors), send.nbytes, send.dtype,
                 "sum", 0, handle)
    r, code = comm.rank, zero_copy_code(window)  # every pair reads zero-copy, from where its data starts in the peer
    codes = {p: (code if sc[p] else 0, code if rc[p] else 0, sum(table[p][1][:r]) * size) for p in range(n) if p != r}
    _launch_reading(comm, call, algo, sends, recvs, descriptors, window, codes)


def _call(comm, collective, send, recv, table, size, dtype, op, root, stream) -> Call:
    """The exchange call of ``table`` between ``send`` and ``recv`` (None: nothing on that side)."""
    s = CallBuffer(None) if send is None else _pair(send)
    r = CallBuffer(None) if recv is None else _pair(recv)
    return Call(collective=collective, sendbuf=None, recvbuf=None, send=s, recv=r, peer_bytes=size,
                message_bytes=size, dtype=dtype, op=op, root=root, stream=stream, in_place=False, layout=table)


def _run(comm, collective, send, sendbuf, recv, recvbuf, sends, recvs, descriptors, size, dtype, op, root, stream,
         algo, zero_copy: tuple[Window, dict] | None = None) -> None:
    """Launch an exchange collective (one rank: its own range copied); ``zero_copy``: (the window the call reads
    peers' buffers through, its pair codes), for the call the exchange runs (``exchange.layout``)."""
    if comm.size == 1:
        (s_off, n), (r_off, _) = sends[0], recvs[0]
        _copy(_pair(recv), r_off, _pair(send), s_off, n, stream)
        return
    call = _call(comm, collective, send, recv, layout(comm.size, sends, recvs, descriptors), size, dtype, op, root,
                 stream)
    window, codes = zero_copy if zero_copy is not None else (None, {})
    _launch_reading(comm, call, algo, sends, recvs, descriptors, window, codes)


def _launch_reading(comm, call: Call, algo: str | None, sends: dict, recvs: dict, descriptors: dict | None,
                    window: Window | None, codes: dict) -> None:
    """Launch ``call``, or, where some pair carries a zero-copy code (``codes``: a rank to its send code, read code
    and peer offset), the same call whose table carries them, reading peers' buffers through ``window``."""
    if not any(a or b for a, b, _ in codes.values()):
        launch(comm, call, algo)
        return
    launch(comm, call, algo, dataclasses.replace(call, layout=layout(comm.size, sends, recvs, descriptors, codes),
                                                 window=window))


def _rooted_window(comm, what: str, mine: BufferInfo, stream: int) -> Window | None:
    """The window a gather or scatter reads peers' buffers (or is read) through: ``mine`` (its send buffer; a
    scatter's receivers: the receive buffer) mapped now when the call is being captured (every rank captures it
    and maps its own, as with the collectives), else the registration ``mine`` starts; None: it stages (so does
    a call with the check off, or across hosts)."""
    if not config.get("PYMSCCLPP_CHECK") or not _one_host(comm):
        return None
    windows = comm.extension("windows", Windows)
    if config.get("PYMSCCLPP_GRAPH_ZERO_COPY") and capturing(stream):
        return windows.capture(what, [(_pair(mine), mine.nbytes)])[0]
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
    if _overlap(info, slot) and slot.ptr != info.ptr + root * slot.nbytes:
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
    _run(comm, "gather", send, sendbuf, recv, recvbuf, sends, recvs,
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
    _run(comm, "scatter", send, sendbuf, recv, recvbuf, sends, recvs,
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
        if _overlap(send, recv) and recv.ptr != send.ptr:
            raise InvalidUsageError("reduce: send and receive buffers overlap; in place, pass the same buffer")
    comm.raise_if_failed()
    if send.nbytes == 0:
        return
    n = send.nbytes
    out = recvbuf if comm.rank == root and recvbuf is not None else sendbuf
    if comm.size == 1:
        _copy(_pair(recv), 0, _pair(send), 0, n, stream_handle(stream, sendbuf, comm.device))
        return
    if comm.rank == root:  # its own row: where its input and output start
        sends, recvs = {root: (0, 0)}, {p: (0, n if p != root else 0) for p in range(comm.size)}
    else:
        sends, recvs = {root: (0, n)}, {}
    _run(comm, "reduce", send, sendbuf, recv if comm.rank == root else None, out, sends, recvs,
         rooted_descriptors(comm.size, comm.rank, "reduce", n, send.dtype, root, op), n, send.dtype, op,
         root,
         stream_handle(stream, sendbuf, comm.device), algo)
