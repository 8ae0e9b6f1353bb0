"""A kernel launched again with unchanged arguments goes out as a one-node CUDA graph: on an H200
``cuGraphLaunch`` costs 2.0-3.3 us of host time against 4.8-6.6 us for ``cuLaunchKernel``, whatever the
parameter bytes. The graph is made, and its node takes a launch's arguments (``cuGraphExecKernelNodeSetParams``),
only once they have been launched ``PROMOTE_AFTER`` times in a row, so calls that alternate buffers keep the
plain launch and a launch never repeated makes no graph; a stream being captured always gets the plain launch
(its graph records the kernel itself). Making and updating the graph run in relaxed capture mode, so a capture
on another stream (torch's are global) is not disturbed.
"""

from __future__ import annotations

import ctypes
import weakref

PROMOTE_AFTER = 2  # plain launches of one set of arguments before their repeats go out as the graph
_DRIVER_CALLS = ("cuGraphCreate", "cuGraphAddKernelNode_v2", "cuGraphInstantiateWithFlags",
                 "cuGraphExecKernelNodeSetParams_v2", "cuGraphLaunch", "cuStreamIsCapturing", "cuGraphExecDestroy",
                 "cuGraphDestroy", "cuThreadExchangeStreamCaptureMode")
_CAPTURE_MODE_RELAXED = 2  # CU_STREAM_CAPTURE_MODE_RELAXED


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
    """One driver call at ``address`` with ctypes-made ``args`` (setup and update only)."""
    return ctypes.CFUNCTYPE(ctypes.c_int)(address)(*args)


def _destroy(addresses: dict, exec_: ctypes.c_void_p, graph: ctypes.c_void_p) -> None:
    if exec_.value:
        _call(addresses["cuGraphExecDestroy"], exec_)
    if graph.value:
        _call(addresses["cuGraphDestroy"], graph)


class GraphRepeat:
    """The graph twin of one prepared launch (function, grid, block, shared bytes, and its ``params`` or ``extra``
    arrays, whose current contents a node update copies). ``launch(version, stream)`` says which to issue."""

    def __init__(self, addresses: dict[str, int], func: int, griddim: int, blockdim: int, sharedmem: int,
                 params, extra):
        self._a = addresses
        self._node_params = KernelNodeParams(func, (griddim, 1, 1), (blockdim, 1, 1), sharedmem,
                                             ctypes.addressof(params) if params is not None else None,
                                             ctypes.addressof(extra) if extra is not None else None, None, None)
        self._graph, self._node, self._exec = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        self._finalizer = weakref.finalize(self, _destroy, addresses, self._exec, self._graph)
        self._finalizer.atexit = False  # the driver may be gone by then; the process's exit frees them
        self.usable = True  # until the driver refuses to make or update the graph
        self._version, self._seen, self._streak = -1, -1, 0  # the arguments the node holds; those launched last
        self._stream, self._status = ctypes.c_void_p(0), ctypes.c_int(0)
        self._is_capturing = ctypes.CFUNCTYPE(ctypes.c_int)(addresses["cuStreamIsCapturing"])
        self._capture_args = (self._stream, ctypes.byref(self._status))
        self._graph_launch = ctypes.CFUNCTYPE(ctypes.c_int)(addresses["cuGraphLaunch"])
        self._launch_args = (self._exec, self._stream)

    def launch(self, version: int, stream: int) -> int | None:
        """The CUresult of launching the graph on ``stream`` for arguments ``version``, or None when the caller
        must launch the kernel itself (these arguments are new, or the stream is being captured)."""
        if version != self._version and not self._promote(version):
            return None
        self._stream.value = stream
        if self._is_capturing(*self._capture_args) != 0 or self._status.value != 0:
            return None
        return self._graph_launch(*self._launch_args)

    def _promote(self, version: int) -> bool:
        """Count a launch of arguments ``version``; on the one after ``PROMOTE_AFTER`` in a row, the node takes
        them (False until then, or if the driver refuses)."""
        if version != self._seen:
            self._seen, self._streak = version, 0
        self._streak += 1
        if self._streak <= PROMOTE_AFTER or not self.usable:
            return False
        mode = ctypes.c_int(_CAPTURE_MODE_RELAXED)
        _call(self._a["cuThreadExchangeStreamCaptureMode"], ctypes.byref(mode))
        try:
            self.usable = self._update()
        finally:
            _call(self._a["cuThreadExchangeStreamCaptureMode"], ctypes.byref(mode))
        if self.usable:
            self._version = version
        return self.usable

    def _update(self) -> bool:
        """Copy the launch's current arguments into the node, making the graph first if there is none yet."""
        a = self._a
        if self._exec.value:
            return _call(a["cuGraphExecKernelNodeSetParams_v2"], self._exec, self._node,
                         ctypes.byref(self._node_params)) == 0
        return (_call(a["cuGraphCreate"], ctypes.byref(self._graph), ctypes.c_uint(0)) == 0 and
                _call(a["cuGraphAddKernelNode_v2"], ctypes.byref(self._node), self._graph, None, ctypes.c_size_t(0),
                      ctypes.byref(self._node_params)) == 0 and
                _call(a["cuGraphInstantiateWithFlags"], ctypes.byref(self._exec), self._graph,
                      ctypes.c_ulonglong(0)) == 0)
