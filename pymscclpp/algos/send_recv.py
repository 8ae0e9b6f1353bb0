"""Send and recv as the Communicator serves them, grouped with NCCL's semantics: the sends and receives posted in
a ``group()`` are checked when posted and issued together as one exchange launch, several send buffers packed into
a staging buffer (and several receives unpacked from one) around it.
"""

from __future__ import annotations

import contextlib
import weakref
import zlib
from typing import NamedTuple

from .. import config
from ..errors import InvalidUsageError
from ..runtime.buffers import BufferInfo, buffer_info, stream_handle
from ..runtime.memory import alloc
from .algorithm import Call, CallBuffer, device_buffer
from .exchange import descriptor, layout, zero_copy_code
from .verb_calls import INT64, call_buffer, check_rank, copy, launch_reading, one_host, overlap
from .windows import Window, Windows


class PeerOp(NamedTuple):
    """One posted send or recv: ``buf`` checked as ``info``, to or from ``peer``, on CUstream ``stream``."""

    kind: str
    buf: object
    info: BufferInfo
    peer: int
    stream: int


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


def _moved_by(ops: list[PeerOp]) -> tuple[int, str, int]:
    """(bytes, dtype or ``mixed``/``none``, digest of the op sizes in order) of one direction's ops with one
    peer: the digest (11 bits, never 0 for ops) tells ``[7, 1500]`` from ``[1500, 7]``."""
    dtypes = {o.info.dtype for o in ops}
    dtype = "none" if not ops else dtypes.pop() if len(dtypes) == 1 else "mixed"
    sizes = b"".join(INT64.pack(o.info.nbytes) for o in ops)
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
            if overlap(r.info, o.info):
                raise InvalidUsageError(f"recv from rank {r.peer}: its buffer overlaps another buffer of the group "
                                        f"({o.kind} {'to' if o.kind == 'send' else 'from'} rank {o.peer})")
    if set(by_peer) == {rank}:  # only sends to itself: copies, no peer and no lanes (their set-up is collective)
        for s, r in zip(*by_peer[rank]):
            copy(call_buffer(r.info), 0, call_buffer(s.info), 0, s.info.nbytes, stream)
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
            copy(send, at, call_buffer(o.info), 0, o.info.nbytes, stream)
    elif send_ops:
        send = call_buffer(send_ops[0].info)
    if staged_recv:
        recv = buffers.get("recv", recv_at)
    elif recv_ops:
        recv = call_buffer(recv_ops[0].info)
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
    launch_reading(comm, call, None, sends, recvs, descriptors, window, codes)
    for o, at in unpacking:
        copy(call_buffer(o.info), 0, recv, at, o.info.nbytes, stream)


def _pair_windows(comm, send: BufferInfo | None, recv: BufferInfo | None) -> tuple[Window | None, Window | None]:
    """(the registered window a send/recv call's one send buffer ``send`` starts, which peers may read from; the
    window this rank reads peers' send buffers through: that one, else the one its one receive buffer ``recv``
    starts): None where the buffer starts none, PYMSCCLPP_SEND_RECV_ZERO_COPY is off or the ranks span hosts.
    Each pair then reads zero-copy exactly where the sender's registration is the receiver's (``exchange_kernels``),
    and stages otherwise."""
    if not config.get("PYMSCCLPP_SEND_RECV_ZERO_COPY") or not one_host(comm):
        return None, None
    windows = comm.extension("windows", Windows)
    sent = None if send is None else windows.find(send.ptr, send.nbytes)
    return sent, sent if sent is not None else None if recv is None else windows.find(recv.ptr, recv.nbytes)
