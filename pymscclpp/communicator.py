"""The user-facing Communicator: the runtime one plus collectives (all_reduce, all_gather, reduce_scatter,
broadcast, all_to_all, with counts too, reduce, gather, scatter), send/recv with ``group()``, over a collection of
algorithms it selects from, and ``register_algorithm`` for your own.

Buffers are any ``__cuda_array_interface__`` object or torch tensor (numba simulator arrays under
the simulator); every argument is checked before anything is launched.
"""

from __future__ import annotations

import contextlib
import dataclasses
import numbers
from typing import Any, Callable, Sequence

from ._log import get_logger
from .algos.algorithm import REDUCING, Algorithm, Call, CallBuffer
from .algos.collection import AlgorithmCollection, pick
from .algos.repeats import RepeatCache, state_of, torch_state
from .algos import all_to_allv, rooted, send_recv
from .algos.exchange import EXCHANGED
from .algos.windows import Windows
from .channels import reduce as red
from .errors import InvalidUsageError
from .fallback import nccl as nccl_fallback
from .runtime.backend import IS_SIM
from .runtime.buffers import Buffer, BufferInfo, Stream, as_numba_stream, buffer_info, bytes_view, stream_handle
from .runtime.communicator import Communicator as _RuntimeCommunicator, entry

_log = get_logger("algos")


def _current_stream_of(tensor: Buffer) -> Callable[[int], int]:
    """``f(device)``: the raw handle of the stream a call with no stream runs on (torch's current one for a tensor,
    else the legacy default stream)."""
    if IS_SIM or state_of(tensor) is not torch_state:
        return lambda device: 0
    import torch
    return torch._C._cuda_getCurrentRawStream


def serves_reduction(dtype: str, op: str) -> bool:
    """Whether pymscclpp's own algorithms reduce ``dtype`` (a name: float32, bfloat16, ...) with ``op`` (sum,
    min, max, prod, avg); the NCCL drop-in and the torch backend ask this too, and send the rest to NCCL."""
    return dtype in red.DTYPE_KINDS and op in red.OPS


class Communicator(_RuntimeCommunicator):
    """A communicator with collectives; build it with ``from_mpi``, ``from_unique_id`` or ``from_env``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.algorithms: AlgorithmCollection = self.extension("algorithms", AlgorithmCollection)
        self._repeats = RepeatCache(self.algorithms)
        self._served: dict[str, Algorithm] = {}  # collective -> the algorithm that served its last call
        self._group = send_recv.Group(self)

    def _repeat(self, key: tuple, sendbuf: Buffer, recvbuf: Buffer | None, stream: Stream) -> bool:
        """Launch a call made before on the same buffers (unchanged), skipping its checks and selection."""
        hit = self._repeats.find(key, sendbuf, recvbuf)
        if hit is None:
            return False
        call = hit.call
        handle = hit.current_stream(self.device) if stream is None else stream_handle(stream, sendbuf, self.device)
        if handle != call.stream:
            call = hit.call = dataclasses.replace(call, stream=handle)
        self.raise_if_failed()
        algorithm = self._served[call.collective] = pick(hit.choice, call)
        algorithm.launch(call)
        if IS_SIM:
            self.check_device_errors()
        return True

    def register_algorithm(self, algorithm: Any, name: str | None = None, collective: str | None = None,
                           prefer: bool = True) -> Algorithm:
        """Add an algorithm on every rank alike: an ``Algorithm`` (e.g. ``KernelAlgorithm``), a DSL program
        (``CollectiveProgram``), or a plan (``Plan``, parsed dict, JSON text or a path to a plan file). With
        ``prefer`` it serves every call it can before the selection table's choice; else ``algo=name`` or the
        tuner's table picks it."""
        if not isinstance(algorithm, Algorithm):
            from .algos.plan_algorithm import PlanAlgorithm
            from .language.program import CollectiveProgram
            plan = algorithm.to_dict() if isinstance(algorithm, CollectiveProgram) else algorithm
            algorithm = PlanAlgorithm(plan, name, collective)
        self.algorithms.register(algorithm, collective or algorithm.collective, name or algorithm.name, prefer)
        return algorithm

    @entry
    def register_buffer(self, buf: Buffer) -> None:
        """Register ``buf`` for zero-copy collectives (collective: every rank registers its own buffer, in the same
        order, and the k-th registrations of the ranks pair up): all-reduces, reduce-scatters, all-gathers,
        out-of-place all-to-alls and broadcasts whose buffers (send and receive; in place the one) start at
        registered ones, on every rank, read peers' inputs and write peers' outputs directly, with no scratch copy;
        every rank must pass, for each argument, a buffer of the same registration (registering the same buffers
        in the same order everywhere does it), else every rank raises CallMismatchError naming the registrations.
        So do all-to-alls with counts (every rank's send buffer) and send/recv pairs whose sender's one send buffer
        starts a buffer of the registration the receiver's own send buffer (receiving only: its receive buffer)
        starts, which the receiver reads directly (other pairs of the same call stage). Deregister it before
        freeing it."""
        self.extension("windows", Windows).register(buf)

    @entry
    def deregister_buffer(self, buf: Buffer) -> None:
        """Undo ``register_buffer`` (every rank alike): calls on ``buf`` go through scratch again."""
        self.extension("windows", Windows).deregister(buf)

    def last_algorithm(self, collective: str) -> Algorithm | None:
        """The algorithm that served this rank's last ``collective`` call that went to an algorithm (None before one;
        empty calls, one-rank copies and NCCL's calls go to none): what a test asserts to know its algorithm ran."""
        return self._served.get(collective, self.algorithms.served.get(collective) if collective in EXCHANGED
                                else None)

    @entry
    def send(self, buf: Buffer, peer: int, stream: Stream = None) -> None:
        """Send ``buf`` to rank ``peer``, whose matching ``recv`` (same count and dtype) takes it; inside
        ``group()`` it is issued at the group's end, else at once."""
        self._group.post("send", buf, peer, stream)

    @entry
    def recv(self, buf: Buffer, peer: int, stream: Stream = None) -> None:
        """Receive into ``buf`` what rank ``peer`` sends with its matching ``send``; grouped as ``send``."""
        self._group.post("recv", buf, peer, stream)

    def group(self) -> contextlib.AbstractContextManager[None]:
        """``with comm.group():`` the sends and receives inside (any peers, order and number, to itself too)
        go out together at the end, in one launch, so they cannot deadlock (NCCL's group semantics)."""
        return self._group.scope()

    @entry
    def reduce(self, sendbuf: Buffer, recvbuf: Buffer | None = None, root: int = 0, op: str = "sum",
               stream: Stream = None, algo: str | None = None) -> None:
        """Reduce every rank's ``sendbuf`` into the root's ``recvbuf`` (None: in place); other ranks' ``recvbuf``
        is neither read nor written (None is fine)."""
        rooted.reduce(self, sendbuf, recvbuf, root, op, stream, algo)

    @entry
    def gather(self, sendbuf: Buffer, recvbuf: Buffer | None = None, root: int = 0, stream: Stream = None,
               algo: str | None = None) -> None:
        """Gather every rank's ``sendbuf`` into the root's ``recvbuf`` (``size`` slots, rank r's at slot r); other
        ranks may pass None for ``recvbuf``."""
        rooted.gather(self, sendbuf, recvbuf, root, stream, algo)

    @entry
    def scatter(self, sendbuf: Buffer | None, recvbuf: Buffer, root: int = 0, stream: Stream = None,
                algo: str | None = None) -> None:
        """Slot r of the root's ``sendbuf`` (``size`` slots) to rank r's ``recvbuf``; other ranks may pass None for
        ``sendbuf``."""
        rooted.scatter(self, sendbuf, recvbuf, root, stream, algo)

    def _pair(self, what: str, sendbuf: Buffer, recvbuf: Buffer | None, recv_factor: int = 1,
              send_factor: int = 1) -> tuple[BufferInfo, BufferInfo]:
        """Validated (send, recv) infos: recv holds ``recv_factor / send_factor`` times the send bytes."""
        send = buffer_info(sendbuf, self.device)
        recv = send if recvbuf is None or recvbuf is sendbuf else buffer_info(recvbuf, self.device)
        if send.count % send_factor:
            raise InvalidUsageError(f"{what}: send buffer of {send.count} elements does not split into "
                                    f"{send_factor} equal slots")
        if send.dtype != recv.dtype:
            raise InvalidUsageError(f"{what}: send buffer is {send.dtype} but receive buffer is {recv.dtype}")
        if send.nbytes * recv_factor != recv.nbytes * send_factor:
            raise InvalidUsageError(f"{what}: receive buffer has {recv.count} elements, expected "
                                    f"{send.count * recv_factor // send_factor} for a send buffer of {send.count}")
        return send, recv

    def _nccl(self, what: str, dtype: str, op: str) -> Any:
        """The NCCL fallback for a reduction pymscclpp does not serve, after checking NCCL could; else the error."""
        if dtype not in red.DTYPE_KINDS:
            why = f"cannot reduce dtype {dtype}: supported are {', '.join(red.DTYPE_KINDS)}"
        else:
            why = f"unknown reduction op {op!r}: supported are {', '.join(red.OPS)}"
        if op not in nccl_fallback.OPS or dtype not in nccl_fallback.DTYPES:
            raise InvalidUsageError(f"{what}: {why}")
        impl = nccl_fallback.fallback_for(self)
        if impl is None:
            raise nccl_fallback.missing(f"{what} of {dtype} with op {op!r}", why)
        return impl

    @entry
    def all_reduce(self, sendbuf: Buffer, recvbuf: Buffer | None = None, op: str = "sum", stream: Stream = None,
                   algo: str | None = None) -> None:
        """Reduce ``sendbuf`` over all ranks into ``recvbuf`` (in place when None or the same buffer)."""
        key = ("all_reduce", id(sendbuf), id(recvbuf), op, algo, 0)
        if self._repeat(key, sendbuf, recvbuf, stream):
            return
        send, recv = self._pair("all_reduce", sendbuf, recvbuf)
        if not serves_reduction(send.dtype, op):
            self._nccl("all_reduce", send.dtype, op).all_reduce(
                send.ptr, recv.ptr, send.count, send.dtype, op, stream_handle(stream, sendbuf, self.device))
            return
        self._run(key, "all_reduce", algo, send.nbytes, send.nbytes, sendbuf, send, recvbuf, recv, stream, op)

    @entry
    def all_gather(self, sendbuf: Buffer, recvbuf: Buffer, stream: Stream = None, algo: str | None = None) -> None:
        """Gather every rank's ``sendbuf`` into ``recvbuf`` (``size`` slots, rank r's at slot r); in place when
        ``sendbuf`` is slot ``rank`` of ``recvbuf``."""
        key = ("all_gather", id(sendbuf), id(recvbuf), "", algo, 0)
        if self._repeat(key, sendbuf, recvbuf, stream):
            return
        send, recv = self._pair("all_gather", sendbuf, recvbuf, recv_factor=self.size)
        self._check_alias("all_gather", send, recv, self.rank * send.nbytes)
        self._run(key, "all_gather", algo, recv.nbytes, send.nbytes, sendbuf, send, recvbuf, recv, stream)

    @entry
    def reduce_scatter(self, sendbuf: Buffer, recvbuf: Buffer, op: str = "sum", stream: Stream = None,
                       algo: str | None = None) -> None:
        """Reduce slot r of every rank's ``sendbuf`` (``size`` slots) into rank r's ``recvbuf``, in rank order;
        in place when ``recvbuf`` is slot ``rank`` of ``sendbuf``."""
        key = ("reduce_scatter", id(sendbuf), id(recvbuf), op, algo, 0)
        if self._repeat(key, sendbuf, recvbuf, stream):
            return
        send, recv = self._pair("reduce_scatter", sendbuf, recvbuf, send_factor=self.size)
        if not serves_reduction(send.dtype, op):
            self._nccl("reduce_scatter", send.dtype, op).reduce_scatter(
                send.ptr, recv.ptr, recv.count, send.dtype, op, stream_handle(stream, sendbuf, self.device))
            return
        self._check_alias("reduce_scatter", recv, send, self.rank * recv.nbytes)
        self._run(key, "reduce_scatter", algo, send.nbytes, recv.nbytes, sendbuf, send, recvbuf, recv, stream, op)

    @entry
    def all_to_all(self, sendbuf: Buffer, recvbuf: Buffer | None = None, stream: Stream = None,
                   algo: str | None = None, send_counts: Sequence[int] | None = None,
                   recv_counts: Sequence[int] | None = None) -> None:
        """Send slot j of ``sendbuf`` (``size`` equal slots) to rank j's ``recvbuf`` slot ``rank`` (in place
        when ``recvbuf`` is None or ``sendbuf``). With ``send_counts``/``recv_counts`` (elements per peer; one
        left None splits its buffer evenly), ``send_counts[j]`` elements from offset ``sum(send_counts[:j])`` go
        to rank j, at its offset ``sum(recv_counts[:rank])``; every rank checks all ranks' counts agree first."""
        if send_counts is not None or recv_counts is not None:
            all_to_allv.all_to_allv(self, sendbuf, recvbuf, send_counts, recv_counts, stream, algo)
            return
        key = ("all_to_all", id(sendbuf), id(recvbuf), "", algo, 0)
        if self._repeat(key, sendbuf, recvbuf, stream):
            return
        send, recv = self._pair("all_to_all", sendbuf, recvbuf, send_factor=self.size, recv_factor=self.size)
        self._check_alias("all_to_all", send, recv, 0)
        self._run(key, "all_to_all", algo, send.nbytes, send.nbytes // self.size, sendbuf, send, recvbuf, recv, stream)

    @entry
    def broadcast(self, sendbuf: Buffer, recvbuf: Buffer | None = None, root: int | None = None, stream: Stream = None,
                  algo: str | None = None) -> None:
        """Copy rank ``root``'s buffer to every rank: ``broadcast(buf, root)`` in place, or
        ``broadcast(sendbuf, recvbuf, root)`` (only the root's ``sendbuf`` is read). ``root`` is required (it has no
        default, as in NCCL); it is a keyword only so that ``recvbuf`` can be left out."""
        if root is None and isinstance(recvbuf, numbers.Integral):
            recvbuf, root = None, recvbuf
        key = ("broadcast", id(sendbuf), id(recvbuf), "", algo, root)
        if self._repeat(key, sendbuf, recvbuf, stream):
            return
        send, recv = self._pair("broadcast", sendbuf, recvbuf)
        if not isinstance(root, numbers.Integral) or isinstance(root, bool) or not 0 <= root < self.size:
            if root is None:
                raise InvalidUsageError(f"broadcast: root is required: the rank whose buffer every rank gets, "
                                        f"0 to {self.size - 1} (broadcast(buf, root) or broadcast(buf, out, root))")
            raise InvalidUsageError(f"broadcast: root must be a rank in [0, {self.size}), got {root!r}")
        self._check_alias("broadcast", send, recv, 0)
        self._run(key, "broadcast", algo, send.nbytes, send.nbytes, sendbuf, send, recvbuf, recv, stream, "sum",
                  int(root))

    def _check_alias(self, what: str, inner: BufferInfo, outer: BufferInfo, offset: int) -> None:
        """Raise unless ``inner`` is disjoint from ``outer`` or exactly its bytes from ``offset`` (in place)."""
        if inner.nbytes == 0 or inner.ptr == outer.ptr + offset:
            return
        if inner.ptr < outer.ptr + outer.nbytes and outer.ptr < inner.ptr + inner.nbytes:
            where = "the same buffer" if inner.nbytes == outer.nbytes else f"slot {self.rank} of the larger one"
            raise InvalidUsageError(f"{what}: send and receive buffers overlap; in place, pass {where}")

    def _run(self, key: tuple, collective: str, algo: str | None, message_bytes: int, peer_bytes: int,
             sendbuf: Buffer, send: BufferInfo, recvbuf: Buffer | None, recv: BufferInfo, stream: Stream,
             op: str = "sum", root: int = 0) -> None:
        """Launch ``collective`` on checked buffers moving ``peer_bytes`` per slot (a copy on one rank)."""
        self.raise_if_failed()
        if peer_bytes == 0:
            return
        out = sendbuf if recvbuf is None else recvbuf
        if self.size == 1:
            if recv.ptr != send.ptr:
                bytes_view(out, recv).copy_to_device(bytes_view(sendbuf, send), stream=as_numba_stream(stream))
            return
        in_place = recv.ptr == send.ptr if collective not in ("all_gather", "reduce_scatter") else \
            (send.ptr == recv.ptr + self.rank * send.nbytes if collective == "all_gather"
             else recv.ptr == send.ptr + self.rank * recv.nbytes)
        call = Call(collective=collective, sendbuf=sendbuf, recvbuf=out,
                    send=CallBuffer(send.ptr, send.array), recv=CallBuffer(recv.ptr, recv.array), peer_bytes=peer_bytes,
                    message_bytes=message_bytes, dtype=send.dtype, op=op if collective in REDUCING else "sum",
                    root=root, stream=stream_handle(stream, sendbuf, self.device), in_place=in_place)
        choice = self.algorithms.choice(call, algo)
        algorithm = self._served[collective] = pick(choice, call)
        _log.debug("%s of %d bytes (%s, %s) served by %r", collective, message_bytes, call.dtype, call.op, algorithm)
        algorithm.launch(call)
        if IS_SIM:  # a simulated kernel has finished by now: its failure is this call's
            self.check_device_errors()
        self._repeats.remember(key, sendbuf, recvbuf, choice, call, _current_stream_of(sendbuf))
