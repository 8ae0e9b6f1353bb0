"""ProxyService: the host side of PortChannels, after MSCCL++'s ProxyService.

One per rank (or more): a FIFO the kernels push triggers into, tables of memories and semaphores
the triggers name by id, a connection per peer (transport + TCP link), a proxy thread that runs
the compiled loop (``loop.serve``) and a receiver thread for the links. Memory, semaphore and
channel setup are pair calls: both ranks of a pair make them in the same order. Any failure
(rejected trigger, transport error, peer gone) aborts this FIFO's device waits, is sent to every
linked peer (which aborts theirs and passes it on), and is raised by ``check()``/``stop()``.
"""

from __future__ import annotations

import selectors
import struct
import threading
from dataclasses import dataclass, field

import numpy as np

from .. import config
from .._log import get_logger
from ..runtime.fifo import CTRL_STOP, DEFAULT_SIZE, MAX_FIELD, MAX_MEMORIES, MAX_SEMAPHORES, TRIGGER_DATA, \
    TRIGGER_FLAG, TRIGGER_SYNC, Fifo, decode
from .port_channel import PortChannel
from ..errors import InvalidUsageError, ProxyError
from ..runtime import handoff
from ..runtime.backend import IS_SIM
from ..runtime.buffers import buffer_info
from ..runtime.memory import RemoteMemory
from ..transports import Transport, forced, negotiate, pack_offer, propose, unpack_offer
from ..transports import frames, ib_wire
from ..transports.ethernet import Stager
from ..transports.link import Link
from ..transports import driver
from . import cpus, loop

_log = get_logger("proxy")
_ETH_MEM = struct.Struct("!IQ")   # the receiver's memory id and size
_SLOT = struct.Struct("!I")
_SPIN_ENV = "PYMSCCLPP_PROXY_SPIN_US"
_BUDGET_NS = 50_000_000           # the compiled loop returns to Python this often when idle
_CLOSE_GRACE_S = 1.0              # how long close() waits for peers' BYE once this proxy failed


def _device_address(arr) -> int:
    return int(arr.ctypes.data) if IS_SIM else int(arr.__cuda_array_interface__["data"][0])


@dataclass
class _Connection:
    transport: Transport
    link: Link
    qp: object = None                      # IbQueuePair for IB
    inbound_slots: set = field(default_factory=set)  # host token slots this peer may FLAG (Ethernet)


@dataclass
class _Memory:
    local: bool
    base: int
    size: int
    peer: int = -1
    transport: Transport | None = None
    remote_id: int = -1                    # the peer's id of this memory (Ethernet)
    exposed_to: set = field(default_factory=set)  # peers that may write it over Ethernet
    keep: object = None                    # the local buffer or RemoteMemory kept alive


@dataclass
class _Semaphore:
    transport: Transport
    peer: int
    inbound: object
    expected: object
    peer_slot: int = -1                    # the peer's host token slot (Ethernet)
    token: ib_wire.Region | None = None    # the peer's token as an RDMA target (IB)


class ProxyService:
    """Moves the bytes of this rank's PortChannels; ``start()`` before kernels push, ``close()`` at the end."""

    def __init__(self, comm, fifo_size: int = DEFAULT_SIZE, transport=None):
        self.comm = comm
        self.fifo = Fifo(fifo_size)
        comm.on_abort(self.fifo.abort)  # comm.abort() ends this FIFO's device waits too
        self._transport = transport
        self._mem = np.zeros((MAX_MEMORIES, loop.MEM_COLS), np.uint64)
        self._sem = np.zeros((MAX_SEMAPHORES, loop.SEM_COLS), np.uint64)
        self._state = np.zeros(loop.STATE_WORDS, np.uint64)
        self._memories: list[_Memory] = []
        self._mapped: dict[tuple, int] = {}    # (peer, its CudaIpc handle) -> memory id: one mapping each
        self._semaphores: list[_Semaphore] = []
        self._conns: dict[int, _Connection] = {}
        self._regions = ib_wire.RegionTable()
        self._ib = None
        self._token_region = self._scratch_region = None
        self._scratch = np.zeros(1, np.uint64)
        self._error: str | None = None
        self._lock = threading.Lock()
        self._thread = self._receiver = None
        self._new_links: list[Link] = []
        self._closing = False
        self._stream = 0
        self.stream_writes: bool | None = None  # whether flags go by cuStreamWriteValue64 (known once started)
        self.cpus: set[int] | None = None       # the CPUs the proxy thread was moved to (None: inherited)

    # -- setup (pair calls) -------------------------------------------------------------------
    def _connection(self, peer: int) -> _Connection:
        """The connection to ``peer``, negotiated and linked on first use (a pair call)."""
        if peer in self._conns:
            return self._conns[peer]
        comm = self.comm
        comm.check_peer(peer)
        from ..transports import ib
        same_host = comm.host_ids[peer] == comm.host_ids[comm.rank]
        choice = forced(self._transport, getattr(comm, "transport", None))
        mine = propose(same_host, ib.problem(), choice)
        tag = comm.next_pair_tag(peer)
        comm.bootstrap.send(pack_offer(mine), peer, tag, what="our transport offer (proxy connection)")
        transport = negotiate(mine, unpack_offer(comm.bootstrap.recv(peer, tag,
                                                                     what="its transport offer (proxy connection)")))
        conn = _Connection(transport, Link.connect(comm, peer))
        if transport == Transport.IB:
            conn.qp = self._ib_queue_pair(peer)
        self._conns[peer] = conn
        with self._lock:
            self._new_links.append(conn.link)
        if self._receiver is None:
            self._receiver = threading.Thread(target=self._receive_loop, name=f"pymscclpp-recv-{comm.rank}",
                                              daemon=True)
            self._receiver.start()
        _log.info("rank %d: peer %d over %s", comm.rank, peer, transport.name)
        return conn

    def _ib_queue_pair(self, peer: int):
        from ..transports.ib import IbEndpoint, IbQueuePair
        if self._ib is None:
            self._ib = IbEndpoint()
            words = self.comm.host_pool.words
            self._token_region = self._ib.register(int(words.ctypes.data), words.nbytes)
            self._scratch_region = self._ib.register(int(self._scratch.ctypes.data), 8)
            for mid, m in enumerate(self._memories):
                if m.local:
                    self._regions.add(mid, self._ib.register(m.base, m.size))
        qp = IbQueuePair(self._ib)
        tag = self.comm.next_pair_tag(peer)
        self.comm.bootstrap.send(ib_wire.pack_qp_info(qp.info()), peer, tag, what="our IB queue pair")
        qp.connect(ib_wire.unpack_qp_info(self.comm.bootstrap.recv(peer, tag, what="its IB queue pair")))
        return qp

    def _add_entry(self, m: _Memory) -> int:
        mid = len(self._memories)
        if mid >= MAX_MEMORIES:
            raise InvalidUsageError(f"rank {self.comm.rank}: a ProxyService holds at most {MAX_MEMORIES} memories")
        if m.size > MAX_FIELD + 1:
            raise InvalidUsageError(f"rank {self.comm.rank}: memory of {m.size} bytes: PortChannel memories are "
                                    "limited to 4 GiB (32-bit offsets)")
        self._memories.append(m)
        row = [loop.KIND_LOCAL if m.local else loop.KIND_REMOTE, int(m.transport or 0), max(m.peer, 0), m.base, m.size]
        self._mem[mid] = row
        return mid

    def add_memory(self, buf) -> int:
        """Make a local device buffer a trigger source; its memory id (the same buffer gives the same id)."""
        info = buffer_info(buf, None if IS_SIM else self.comm.device)
        for mid, m in enumerate(self._memories):
            if m.local and m.base == info.ptr and m.size == info.nbytes:
                return mid
        mid = self._add_entry(_Memory(True, info.ptr, info.nbytes, keep=buf))
        if self._ib is not None:
            self._regions.add(mid, self._ib.register(info.ptr, info.nbytes))
        return mid

    def add_remote_memory(self, peer: int, inbox) -> int:
        """Expose our ``inbox`` to ``peer`` and get the peer's (a pair call); the id of the peer's inbox."""
        conn = self._connection(peer)
        comm, tag = self.comm, self.comm.next_pair_tag(peer)
        if conn.transport == Transport.CUDA_IPC:
            seen: dict = {}

            def open_peer(handle: bytes):
                seen["handle"] = handle
                if (peer, handle) in self._mapped:  # the peer exposed this buffer before: the same entry
                    return None
                return RemoteMemory(handle, job_token=comm.job_token)

            remote = handoff.trade(comm.bootstrap, peer, tag, comm.register_memory(inbox).serialize(), open_peer,
                                   "port-channel inbox (add_remote_memory)")
            handle = seen["handle"]
            if remote is None:
                return self._mapped[peer, handle]
            if remote.rank != peer:
                raise ProxyError(f"rank {comm.rank}: memory handle from peer {peer} claims rank {remote.rank}")
            mid = self._add_entry(_Memory(False, _device_address(remote.array), remote.nbytes, peer,
                                          Transport.CUDA_IPC, keep=remote))
            self._mapped[peer, handle] = mid
            return mid
        local_id = self.add_memory(inbox)
        if conn.transport == Transport.ETHERNET:
            self._memories[local_id].exposed_to.add(peer)
            comm.bootstrap.send(_ETH_MEM.pack(local_id, self._memories[local_id].size), peer, tag,
                                what="our port-channel inbox's id and size (add_remote_memory)")
            data = comm.bootstrap.recv(peer, tag, what="its port-channel inbox's id and size (add_remote_memory)")
            if len(data) != _ETH_MEM.size:
                raise ProxyError(f"rank {comm.rank}: bad memory record from peer {peer}")
            remote_id, size = _ETH_MEM.unpack(data)
            for mid, m in enumerate(self._memories):  # the peer exposed this memory before: the same entry
                if not m.local and m.peer == peer and m.remote_id == remote_id and m.size == size:
                    return mid
            return self._add_entry(_Memory(False, 0, size, peer, Transport.ETHERNET, remote_id=remote_id))
        comm.bootstrap.send(ib_wire.pack_region(self._regions.get(local_id)), peer, tag,
                            what="our port-channel inbox's IB region (add_remote_memory)")
        what = "its port-channel inbox's IB region (add_remote_memory)"
        region = ib_wire.unpack_region(comm.bootstrap.recv(peer, tag, what=what))
        mid = self._add_entry(_Memory(False, region.addr, region.length, peer, Transport.IB))
        self._regions.add(mid, region)
        return mid

    def add_semaphore(self, peer: int) -> int:
        """A semaphore the proxy signals on ``peer`` and ``peer``'s proxy signals here (a pair call); its id."""
        conn = self._connection(peer)
        sid = len(self._semaphores)
        if sid >= MAX_SEMAPHORES:
            raise InvalidUsageError(f"rank {self.comm.rank}: a ProxyService holds at most {MAX_SEMAPHORES} semaphores")
        comm, tag = self.comm, self.comm.next_pair_tag(peer)
        dev = comm.device_pool
        if conn.transport == Transport.CUDA_IPC:
            slot = dev.slots.take()
            sem = _Semaphore(conn.transport, peer, dev.inbound(slot), dev.expected_counter(slot))
        else:
            slot = comm.host_pool.slots.take()
            sem = _Semaphore(conn.transport, peer, comm.host_pool.device_inbound(slot),
                             dev.expected_counter(dev.slots.take()))
            conn.inbound_slots.add(slot)
        mine = _SLOT.pack(slot)
        if conn.transport == Transport.IB:
            mine += ib_wire.pack_region(self._token_region)
        comm.bootstrap.send(mine, peer, tag, what="our port-channel semaphore slot (add_semaphore)")
        data = comm.bootstrap.recv(peer, tag, what="its port-channel semaphore slot (add_semaphore)")
        if len(data) != len(mine):
            raise ProxyError(f"rank {comm.rank}: bad semaphore record from peer {peer}")
        (peer_slot,) = _SLOT.unpack(data[:_SLOT.size])
        token = 0
        if conn.transport == Transport.CUDA_IPC:
            token = _device_address(comm.peer_pools[peer].device.array) + 8 * peer_slot
        elif conn.transport == Transport.ETHERNET:
            sem.peer_slot = peer_slot
        else:
            region = ib_wire.unpack_region(data[_SLOT.size:])
            sem.token = ib_wire.Region(region.addr + 8 * peer_slot, 8, 0, region.rkey)
        self._semaphores.append(sem)
        self._sem[sid] = [int(conn.transport), peer, token, 0]
        return sid

    def port_channel(self, semaphore_id: int, dst_id: int, src_id: int) -> PortChannel:
        """A PortChannel over semaphore ``semaphore_id`` putting from local memory ``src_id`` to remote ``dst_id``."""
        if not 0 <= semaphore_id < len(self._semaphores):
            raise InvalidUsageError(f"rank {self.comm.rank}: no semaphore {semaphore_id} in this ProxyService")
        peer = self._semaphores[semaphore_id].peer
        for what, mid, local in (("destination", dst_id, False), ("source", src_id, True)):
            if not 0 <= mid < len(self._memories) or self._memories[mid].local != local:
                raise InvalidUsageError(f"rank {self.comm.rank}: {what} memory {mid} is not a "
                                        f"{'local' if local else 'remote'} memory of this ProxyService")
        if self._memories[dst_id].peer != peer:
            raise InvalidUsageError(f"rank {self.comm.rank}: destination memory {dst_id} belongs to peer "
                                    f"{self._memories[dst_id].peer}, not to the semaphore's peer {peer}")
        return PortChannel(self, semaphore_id, dst_id, src_id)

    def connect(self, peer: int, src, inbox=None) -> PortChannel:
        """A PortChannel to ``peer`` (a pair call): put from ``src`` into the peer's ``inbox`` (default: its src)."""
        sid = self.add_semaphore(peer)
        dst = self.add_remote_memory(peer, src if inbox is None else inbox)
        return self.port_channel(sid, dst, self.add_memory(src))

    def transport(self, peer: int) -> Transport:
        """The transport of the connection to ``peer`` (negotiated on first use: a pair call)."""
        return self._connection(peer).transport

    @property
    def memory_count(self) -> int:
        """Memories in the table (local and remote; at most MAX_MEMORIES)."""
        return len(self._memories)

    def semaphore_peer(self, semaphore_id: int) -> int:
        return self._semaphores[semaphore_id].peer

    def semaphore_words(self, semaphore_id: int):
        """The inbound token and expected counter of a semaphore, as device arrays."""
        sem = self._semaphores[semaphore_id]
        return sem.inbound, sem.expected

    # -- running ------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the proxy thread (compiles the loop on first use)."""
        self.check()
        if self._thread is not None:
            raise InvalidUsageError(f"rank {self.comm.rank}: the proxy is already running")
        self.fifo.ctrl[CTRL_STOP] = 0
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(ready,), name=f"pymscclpp-proxy-{self.comm.rank}",
                                        daemon=True)
        self._thread.start()
        ready.wait()
        self.check()

    def stop(self) -> None:
        """Stop the proxy thread once it is idle (after the triggers already pushed); raise a recorded failure."""
        if self._thread is not None:
            self.fifo.ctrl[CTRL_STOP] = 1
            self._thread.join()
            self._thread = None
        self.check()

    def check(self) -> None:
        """Raise ProxyError if this proxy, or a proxy of a linked peer, failed."""
        if self._error is not None:
            raise ProxyError(self._error)

    @property
    def failed(self) -> bool:
        return self._error is not None

    def _spin(self) -> tuple[int, int]:
        """(ns an idle proxy busy-polls before it starts sleeping, us per sleep) from PYMSCCLPP_PROXY_SPIN_US."""
        spin_us = config.get(_SPIN_ENV)
        if spin_us is None:
            spin_us = 0.0 if IS_SIM else 100_000.0
        return int(spin_us * 1000), (200 if IS_SIM else 10)

    def _serve(self, ready: threading.Event) -> None:
        try:
            self.cpus = cpus.place_thread(self.comm.device, "inherit" if IS_SIM else "auto")
            driver.make_current(self.comm.device)
            self._stream = driver.create_stream()
            self.stream_writes = driver.stream_writes_work(self._stream)
            if not self.stream_writes:
                _log.warning("rank %d: cuStreamWriteValue64 does not work here: every PortChannel signal "
                             "synchronizes the proxy stream (slow)", self.comm.rank)
            serve, _ = loop.build(not IS_SIM, self.stream_writes)
            self._stager = Stager(self._stream)
        except BaseException as exc:
            self.fail(f"rank {self.comm.rank}: the proxy could not start: {exc}")
            ready.set()
            return
        ready.set()
        spin_ns, sleep_us = self._spin()
        fifo, state = self.fifo, self._state
        try:
            while True:
                rc = serve(fifo.triggers, fifo.ctrl, state, self._mem, self._sem, self._stream, spin_ns, sleep_us,
                           _BUDGET_NS)
                if rc == loop.IDLE:
                    if fifo.ctrl[CTRL_STOP] or self._error is not None:
                        break
                elif rc == loop.HOST:
                    self._run_host(int(state[loop.ST_W0]), int(state[loop.ST_W1]))
                    loop.advance(state, fifo.ctrl)
                elif rc == loop.REJECT:
                    self.fail(self._reject_text(int(state[loop.ST_DETAIL])))
                    break
                else:
                    self.fail(f"rank {self.comm.rank}: proxy copy failed with CUresult {int(state[loop.ST_DETAIL])} "
                              f"on trigger #{int(state[loop.ST_TAIL])}")
                    break
        except BaseException as exc:
            self.fail(f"rank {self.comm.rank}: proxy thread died: {type(exc).__name__}: {exc}")
        finally:
            if not IS_SIM:
                driver.stream_sync(self._stream)
                driver.destroy_stream(self._stream)

    def _reject_text(self, reason: int) -> str:
        t = decode(self._state[loop.ST_W0], self._state[loop.ST_W1])
        sid = t.semaphore_id
        where = (f"PortChannel semaphore {sid} (rank {self.comm.rank} -> peer {self._semaphores[sid].peer})"
                 if sid < len(self._semaphores) else f"PortChannel semaphore {sid} (rank {self.comm.rank})")
        text = loop.REASONS[reason].format(sem=sid, src=t.src_id, dst=t.dst_id, size=t.size,
                                           src_off=t.src_offset, dst_off=t.dst_offset)
        return f"{where}: trigger #{int(self._state[loop.ST_TAIL])} {text}: rejected, not executed ({t})"

    def _run_host(self, w0: int, w1: int) -> None:
        """Execute one trigger of an Ethernet or IB channel (already validated by the loop)."""
        t = decode(w0, w1)
        sem = self._semaphores[t.semaphore_id]
        conn = self._conns[sem.peer]
        if conn.transport == Transport.ETHERNET:
            flag = frames.encode(frames.Kind.FLAG, sem.peer_slot) if t.type & TRIGGER_FLAG else b""
            if t.type & TRIGGER_DATA and t.size:  # DATA and its FLAG leave in one send (one segment when small)
                src = self._memories[t.src_id].base + t.src_offset
                self._stager.send(conn.link, self._memories[t.dst_id].remote_id, t.dst_offset, src, t.size, flag)
            elif flag:
                conn.link.send(flag)
            return  # sends are synchronous: a sync trigger has nothing left to wait for
        wrs = ib_wire.work_requests(t, self._regions, sem.token, self._scratch_region)
        conn.qp.post(wrs, self.comm.timeout_s)
        if t.type & TRIGGER_SYNC:
            conn.qp.flush(self.comm.timeout_s)

    # -- faults -------------------------------------------------------------------------------
    def fail(self, message: str) -> None:
        """Record the first failure, abort device waits on this FIFO, and tell every linked peer."""
        with self._lock:
            if self._error is not None:
                return
            self._error = message
        _log.error("%s", message)
        self.fifo.abort()
        for conn in list(self._conns.values()):
            try:
                conn.link.send(frames.abort_frame(message))
            except Exception:  # that peer is gone already: it learns from its own link
                pass

    def _receive_loop(self) -> None:
        try:  # made before any kernel waits on this thread: allocations may synchronize the device
            cpus.place_thread(self.comm.device, "inherit" if IS_SIM else "auto")
            driver.make_current(self.comm.device)
            stager = Stager(driver.create_stream())
        except BaseException as exc:
            self.fail(f"rank {self.comm.rank}: the proxy receiver could not start: {exc}")
            return
        sel = selectors.DefaultSelector()
        live = 0
        while True:
            with self._lock:
                fresh, self._new_links = self._new_links, []
            for link in fresh:
                sel.register(link.sock, selectors.EVENT_READ, link)
                live += 1
            if self._closing and live == 0:
                break
            try:
                ready = sel.select(timeout=0.05)
            except (OSError, ValueError):  # close() gave up waiting and closed the sockets
                break
            for key, _ in ready:
                link = key.data
                try:
                    if self._handle_frame(link, stager):
                        continue
                except Exception as exc:
                    if not self._closing or not link.bye_received:
                        self.fail(f"rank {self.comm.rank}: {exc}" if not str(exc).startswith("rank") else str(exc))
                sel.unregister(link.sock)
                live -= 1
        sel.close()

    def _handle_frame(self, link: Link, stager: Stager) -> bool:
        """Read and apply one frame from ``link``; False once the link has ended (BYE)."""
        h = frames.decode_header(link.read_exact(frames.HEADER_SIZE))
        peer = link.peer
        if h.kind == frames.Kind.DATA:
            m = self._memories[h.a] if h.a < len(self._memories) else None
            if m is None or not m.local or peer not in m.exposed_to or h.b + h.length > m.size:
                raise ProxyError(f"rank {self.comm.rank}: peer {peer} sent {h.length} bytes for memory {h.a} at "
                                 f"offset {h.b}, which it may not write: rejected")
            stager.receive(link, m.base + h.b, h.length)
        elif h.kind == frames.Kind.FLAG:
            if h.a not in self._conns[peer].inbound_slots:
                raise ProxyError(f"rank {self.comm.rank}: peer {peer} signalled token {h.a}, not one of its "
                                 "semaphores: rejected")
            words = self.comm.host_pool.words
            words[h.a] = words[h.a] + np.uint64(1)
        elif h.kind == frames.Kind.ABORT:
            reason = link.read_exact(h.length).decode("utf-8", "replace")
            self.fail(f"rank {self.comm.rank}: aborted because a proxy failed: {reason}")
        else:
            link.bye_received = True
            return False
        return True

    # -- teardown -----------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the proxy, end every link in order (waits for the peers to close theirs), release resources.
        Collective over the linked peers, but not once the communicator is aborted (then no BYE is sent or waited
        for); a recorded failure stays readable through ``check()``."""
        aborted = self.comm.aborted
        if aborted:
            self.fifo.abort()
        if self._thread is not None:
            self.fifo.ctrl[CTRL_STOP] = 1
            self._thread.join()
            self._thread = None
        self._closing = True
        for conn in self._conns.values() if not aborted else ():
            try:
                conn.link.send_bye()
            except Exception:
                pass
        if self._receiver is not None and not aborted:
            budget = _CLOSE_GRACE_S if self.failed else (self.comm.timeout_s or 60.0)
            self._receiver.join(budget)
            if self._receiver.is_alive():
                self.fail(f"rank {self.comm.rank}: peers did not close their proxy links within {budget} s")
        for conn in self._conns.values():
            conn.link.close()
            if conn.qp is not None:
                conn.qp.close()
        if self._receiver is not None:
            self._receiver.join(1.0)
        for m in self._memories:
            if isinstance(m.keep, RemoteMemory):
                m.keep.close()
        if self._ib is not None:
            self._ib.close()
        self.fifo.close()
        self._conns.clear()

    def __enter__(self) -> "ProxyService":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
