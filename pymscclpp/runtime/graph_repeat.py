"""A kernel launched again with unchanged arguments goes out as a one-node CUDA graph: on an H200
``cuGraphLaunch`` costs 2.0-3.3 us of host time against 4.8-6.6 us for ``cuLaunchKernel``, whatever the
parameter bytes. A graph takes a launch's arguments only once they have been launched plainly
``PROMOTE_AFTER`` times, so a launch never repeated makes no graph. Two ways to name the arguments: a version
of the launch's slots (one graph, updated by ``cuGraphExecKernelNodeSetParams`` when the version changes
after a streak), or a caller's key (a graph kept per key, so calls that take turns each keep theirs). A stream
being captured always gets the plain launch (its graph records the kernel itself). Graphs are made and updated
in relaxed capture mode, so a capture on another stream (torch's are global) is not disturbed.
"""

from __future__ import annotations

import ctypes
import weakref

from .capture import Relaxed

PROMOTE_AFTER = 2  # plain launches of one set of arguments before their repeats go out as a graph
KEPT = 64  # graphs kept by key per launch, the oldest destroyed first
_DRIVER_CALLS = ("cuGraphCreate", "cuGraphAddKernelNode_v2", "cuGraphInstantiateWithFlags",
                 "cuGraphExecKernelNodeSetParams_v2", "cuGraphLaunch", "cuStreamIsCapturing", "cuGraphExecDestroy",
                 "cuGraphDestroy", "cuThreadExchangeStreamCaptureMode")


class KernelNodeParams(ctypes.Structure):
    """CUDA_KERNEL_NODE_PARAMS_v2."""
    _fields_ = [("func", ctypes.c_void_p), ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("shared", ctypes.c_uint), ("kernel_params", ctypes.c_void_p), ("extra", ctypes.c_void_p),
                ("kern", ctypes.c_void_p), ("ctx", ctypes.c_void_p)]


def driver_addresses(lib) -> dict[str, int] | None:
    """The addresses of the driver calls a GraphRepeat makes, from ``lib`` (libcuda); None if one is missing."""
    try:
        return {name: ctypes.cast(getattr(lib, name), ctypes.c_void_p).value for name in _DRIVER_CALLS}
    except AttributeError:
        return None


def _call(address: int, *args) -> int:
    """One driver call at ``address`` with ctypes-made ``args`` (making and updating graphs only)."""
    return ctypes.CFUNCTYPE(ctypes.c_int)(address)(*args)


def _destroy(addresses: dict, exec_: ctypes.c_void_p, graph: ctypes.c_void_p) -> None:
    """Destroy a graph and its exec (in flight, it is freed when it completes), in relaxed capture mode."""
    with Relaxed(addresses["cuThreadExchangeStreamCaptureMode"]):
        if exec_.value:
            _call(addresses["cuGraphExecDestroy"], exec_)
        if graph.value:
            _call(addresses["cuGraphDestroy"], graph)


class _OneGraph:
    """A graph of one kernel node, made from ``node_params`` as they are (the node copies the arguments)."""

    def __init__(self, addresses: dict, node_params: KernelNodeParams):
        a = self._a = addresses
        self.graph, self.node, self.exec = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        self.destroy = weakref.finalize(self, _destroy, addresses, self.exec, self.graph)
        self.destroy.atexit = False  # the driver may be gone by then; the process's exit frees them
        self.made = (_call(a["cuGraphCreate"], ctypes.byref(self.graph), ctypes.c_uint(0)) == 0 and
                     _call(a["cuGraphAddKernelNode_v2"], ctypes.byref(self.node), self.graph, None,
                           ctypes.c_size_t(0), ctypes.byref(node_params)) == 0 and
                     _call(a["cuGraphInstantiateWithFlags"], ctypes.byref(self.exec), self.graph,
                           ctypes.c_ulonglong(0)) == 0)

    def update(self, node_params: KernelNodeParams) -> bool:
        """Copy the arguments ``node_params`` point at into the node."""
        return _call(self._a["cuGraphExecKernelNodeSetParams_v2"], self.exec, self.node,
                     ctypes.byref(node_params)) == 0


class GraphRepeat:
    """The graph twin of one prepared launch (function, grid, block, shared bytes, and its ``params`` or ``extra``
    arrays, whose current contents a graph copies when made or updated)."""

    def __init__(self, addresses: dict[str, int], func: int, griddim: int, blockdim: int, sharedmem: int,
                 params, extra):
        self._a = addresses
        self._node_params = KernelNodeParams(func, (griddim, 1, 1), (blockdim, 1, 1), sharedmem,
                                             ctypes.addressof(params) if params is not None else None,
                                             ctypes.addressof(extra) if extra is not None else None, None, None)
        self.usable = True  # until the driver refuses to make or update a graph
        self._current: _OneGraph | None = None  # the graph of the slots' versions
        self._version, self._seen, self._streak = -1, -1, 0  # the version it holds; the one launched last, how often
        self._kept: dict[int, tuple] = {}  # id(key) -> (key, its graph)
        self._counts: dict[int, list] = {}  # id(key) -> [key, plain launches so far]
        self._stream, self._status = ctypes.c_void_p(0), ctypes.c_int(0)
        self._is_capturing = ctypes.CFUNCTYPE(ctypes.c_int)(addresses["cuStreamIsCapturing"])
        self._capture_args = (self._stream, ctypes.byref(self._status))
        self._graph_launch = ctypes.CFUNCTYPE(ctypes.c_int)(addresses["cuGraphLaunch"])

    def launch(self, version: int, stream: int) -> int | None:
        """The CUresult of launching the graph of slot version ``version`` on ``stream``, or None when the caller
        must launch the kernel itself (a version too new, or the stream is being captured)."""
        if version != self._version and not self._promote(version):
            return None
        return self._go(self._current, stream)

    def launch_kept(self, key, stream: int) -> int | None:
        """The CUresult of launching the graph kept for ``key`` on ``stream``; None if there is none yet or the
        stream is being captured."""
        kept = self._kept.get(id(key))
        if kept is None or kept[0] is not key:
            return None
        return self._go(kept[1], stream)

    def launched(self, key) -> None:
        """The slots hold ``key``'s arguments and were just launched plainly: the ``PROMOTE_AFTER``-th time, a
        graph of them is made and kept for ``key`` (held until destroyed, the oldest first)."""
        count = self._counts.get(id(key))
        if count is None or count[0] is not key:
            if len(self._counts) >= 4 * KEPT:
                del self._counts[next(iter(self._counts))]
            count = self._counts[id(key)] = [key, 0]
        count[1] += 1
        if count[1] != PROMOTE_AFTER or not self.usable:
            return
        del self._counts[id(key)]
        if len(self._kept) >= KEPT:
            self._kept.pop(next(iter(self._kept)))[1].destroy()
        with Relaxed(self._a["cuThreadExchangeStreamCaptureMode"]):
            graph = _OneGraph(self._a, self._node_params)
        if not graph.made:
            self.usable = False
            return
        self._kept[id(key)] = (key, graph)

    def _go(self, graph: _OneGraph, stream: int) -> int | None:
        self._stream.value = stream
        if self._is_capturing(*self._capture_args) != 0 or self._status.value != 0:
            return None
        return self._graph_launch(graph.exec, self._stream)

    def _promote(self, version: int) -> bool:
        """Count a launch of slot version ``version``; on the one after ``PROMOTE_AFTER`` in a row, the graph
        takes its arguments (False until then, or if the driver refuses)."""
        if version != self._seen:
            self._seen, self._streak = version, 0
        self._streak += 1
        if self._streak <= PROMOTE_AFTER or not self.usable:
            return False
        with Relaxed(self._a["cuThreadExchangeStreamCaptureMode"]):
            if self._current is None:
                self._current = _OneGraph(self._a, self._node_params)
                self.usable = self._current.made
            else:
                self.usable = self._current.update(self._node_params)
        if self.usable:
            self._version = version
        return self.usable
