"""Repeated launches as a one-node CUDA graph, through C callbacks of the driver calls' own signatures (no GPU):
which launches go out as the graph, what the node holds, and when the kernel itself must go."""

from __future__ import annotations

import ctypes

import pytest

from pymscclpp.runtime import graph_repeat
from pymscclpp.runtime.graph_repeat import KEPT, PROMOTE_AFTER, GraphRepeat, KernelNodeParams

P, VP, INT = ctypes.POINTER, ctypes.c_void_p, ctypes.c_int
GRAPH, NODE, EXEC = 0x6A, 0x70, 0xE0


class FakeDriver:
    """The driver calls, recording what they were given; ``capturing`` and ``refuse_updates`` steer them. The
    thread's capture mode starts global (0), torch's default."""

    def __init__(self, buffer):
        self.buffer, self.capturing, self.refuse_updates = buffer, False, False
        self.node_holds, self.graph_launches, self.updates, self.destroyed = None, [], 0, []
        self.first_node, self.mode, self.modes_seen, self.destroy_modes = None, 0, [], []
        signatures = {
            "cuGraphCreate": (ctypes.CFUNCTYPE(INT, P(VP), ctypes.c_uint), self.create),
            "cuGraphAddKernelNode_v2": (ctypes.CFUNCTYPE(INT, P(VP), VP, VP, ctypes.c_size_t, P(KernelNodeParams)),
                                        self.add_node),
            "cuGraphInstantiateWithFlags": (ctypes.CFUNCTYPE(INT, P(VP), VP, ctypes.c_ulonglong), self.instantiate),
            "cuGraphExecKernelNodeSetParams_v2": (ctypes.CFUNCTYPE(INT, VP, VP, P(KernelNodeParams)), self.update),
            "cuGraphLaunch": (ctypes.CFUNCTYPE(INT, VP, VP), self.launch),
            "cuStreamIsCapturing": (ctypes.CFUNCTYPE(INT, VP, P(INT)), self.is_capturing),
            "cuGraphExecDestroy": (ctypes.CFUNCTYPE(INT, VP), self.destroy),
            "cuGraphDestroy": (ctypes.CFUNCTYPE(INT, VP), self.destroy),
            "cuThreadExchangeStreamCaptureMode": (ctypes.CFUNCTYPE(INT, P(INT)), self.exchange_mode),
        }
        self.callbacks = {name: kind(fn) for name, (kind, fn) in signatures.items()}
        self.addresses = {name: ctypes.cast(cb, VP).value for name, cb in self.callbacks.items()}

    def create(self, graph, flags):
        self.graphs_made = getattr(self, "graphs_made", 0) + 1
        graph[0] = GRAPH + 0x100 * (self.graphs_made - 1)
        return 0

    def add_node(self, node, graph, deps, count, params):
        assert (graph & 0xFF, deps, count) == (GRAPH, None, 0)
        p = params[0]
        self.first_node = (p.func, tuple(p.grid), tuple(p.block), p.shared, p.kernel_params, p.extra)
        self.node_holds = bytes(self.buffer)  # a new node copies the arguments as they are
        self.modes_seen.append(self.mode)
        node[0] = NODE
        return 0

    def destroy(self, handle):
        self.destroyed.append(handle)
        self.destroy_modes.append(self.mode)
        return 0

    def exchange_mode(self, mode):
        self.mode, mode[0] = mode[0], self.mode
        return 0

    def instantiate(self, exec_, graph, flags):
        exec_[0] = EXEC + (graph - GRAPH)  # exec n belongs to graph n
        self.holds = getattr(self, "holds", {})
        self.holds[exec_[0]] = self.node_holds
        return 0

    def update(self, exec_, node, params):
        assert (exec_, node) == (EXEC, NODE)  # the slots' graph, the first made
        if self.refuse_updates:
            return 1
        self.updates += 1
        self.node_holds = self.holds[exec_] = bytes(self.buffer)  # the driver copies the packed buffer now
        self.modes_seen.append(self.mode)
        return 0

    def launch(self, exec_, stream):
        self.graph_launches.append((exec_, stream, self.holds[exec_]))
        return 0

    def is_capturing(self, stream, status):
        status[0] = 1 if self.capturing else 0
        return 0


@pytest.fixture
def setup():
    buffer = (ctypes.c_char * 16)()
    extra = (VP * 5)(1, ctypes.addressof(buffer), 2, 0, 0)
    driver = FakeDriver(buffer)
    repeat = GraphRepeat(driver.addresses, 0xF00D, 4, 128, 32, None, extra)
    return driver, repeat, buffer, extra


def test_the_graph_is_made_on_the_first_promotion_with_the_launchs_function_grid_block_and_arguments(setup):
    driver, repeat, _, extra = setup
    for _ in range(PROMOTE_AFTER):
        repeat.launch(1, 0x55)
    assert driver.first_node is None  # a launch never repeated makes no graph
    assert repeat.launch(1, 0x55) == 0
    assert driver.first_node == (0xF00D, (4, 1, 1), (128, 1, 1), 32, None, ctypes.addressof(extra))


def test_the_graph_is_made_and_updated_in_relaxed_capture_mode_then_the_threads_mode_is_restored(setup):
    driver, repeat, buffer, _ = setup
    for version in (1, 2):
        buffer[0] = b"AB"[version - 1:version]
        for _ in range(PROMOTE_AFTER + 1):
            repeat.launch(version, 0x55)
    assert driver.modes_seen == [2, 2] and driver.mode == 0  # made, then updated; global again after each


def test_repeats_go_out_as_the_graph_only_after_the_same_arguments_launched_plainly_in_a_row(setup):
    driver, repeat, buffer, _ = setup
    buffer[0] = b"A"
    assert [repeat.launch(1, 0x55) for _ in range(PROMOTE_AFTER)] == [None] * PROMOTE_AFTER
    assert driver.graph_launches == []
    assert repeat.launch(1, 0x55) == 0 and repeat.launch(1, 0x66) == 0
    assert driver.updates == 0  # the new node took them
    assert [(e, s, held[:1]) for e, s, held in driver.graph_launches] == [(EXEC, 0x55, b"A"), (EXEC, 0x66, b"A")]


def test_changed_arguments_go_out_plainly_until_the_node_has_taken_them(setup):
    driver, repeat, buffer, _ = setup
    buffer[0] = b"A"
    for _ in range(PROMOTE_AFTER + 1):
        repeat.launch(1, 0)
    buffer[0] = b"B"
    assert [repeat.launch(2, 0) for _ in range(PROMOTE_AFTER)] == [None] * PROMOTE_AFTER
    assert repeat.launch(2, 0) == 0
    assert driver.updates == 1
    assert [held[:1] for _, _, held in driver.graph_launches] == [b"A", b"B"]


def test_alternating_arguments_never_update_the_node(setup):
    driver, repeat, _, _ = setup
    assert all(repeat.launch(v, 0) is None for v in [1, 2] * 10)
    assert driver.updates == 0 and driver.graph_launches == []


def test_a_stream_being_captured_gets_the_kernel_itself(setup):
    driver, repeat, _, _ = setup
    for _ in range(PROMOTE_AFTER + 1):
        repeat.launch(1, 0x55)
    driver.capturing = True
    assert repeat.launch(1, 0x77) is None
    driver.capturing = False
    assert repeat.launch(1, 0x77) == 0
    assert [s for _, s, _ in driver.graph_launches] == [0x55, 0x77]


def test_a_refused_node_update_leaves_every_launch_plain(setup):
    driver, repeat, _, _ = setup
    for _ in range(PROMOTE_AFTER + 1):
        repeat.launch(1, 0)
    driver.refuse_updates = True
    assert all(repeat.launch(2, 0) is None for _ in range(PROMOTE_AFTER + 5))
    assert all(repeat.launch(3, 0) is None for _ in range(PROMOTE_AFTER + 5))
    assert len(driver.graph_launches) == 1 and not repeat.usable


def test_dropping_the_repeat_destroys_its_graph_and_exec():
    extra = (VP * 5)(0, 0, 0, 0, 0)
    driver = FakeDriver((ctypes.c_char * 1)())
    repeat = GraphRepeat(driver.addresses, 1, 1, 1, 0, None, extra)
    for _ in range(PROMOTE_AFTER + 1):
        repeat.launch(1, 0)
    del repeat
    assert sorted(driver.destroyed) == [GRAPH, EXEC]
    assert driver.destroy_modes == [2, 2] and driver.mode == 0  # relaxed capture mode, then the thread's own


def test_driver_addresses_needs_every_call():
    class Lib:
        pass
    assert graph_repeat.driver_addresses(Lib()) is None


def keyed(repeat, key, stream=0x55):
    """What a caller does: the kept graph if there is one, else a plain launch it reports."""
    rc = repeat.launch_kept(key, stream)
    if rc is None:
        repeat.launched(key)
        return "plain"
    return "graph"


def test_calls_that_take_turns_each_get_a_graph_holding_their_own_arguments(setup):
    driver, repeat, buffer, _ = setup
    a, b = object(), object()
    seen = []
    for _ in range(PROMOTE_AFTER + 1):
        for key, byte in ((a, b"A"), (b, b"B")):
            buffer[0] = byte  # the caller binds the slots before a plain launch
            seen.append(keyed(repeat, key))
    assert seen == ["plain", "plain"] * PROMOTE_AFTER + ["graph", "graph"]
    buffer[0] = b"Z"  # whatever the slots hold now, a kept graph launches its own arguments
    assert keyed(repeat, a) == "graph" and keyed(repeat, b) == "graph"
    assert [held[:1] for _, _, held in driver.graph_launches] == [b"A", b"B", b"A", b"B"]


def test_a_key_is_recognised_by_identity_not_equality(setup):
    driver, repeat, _, _ = setup
    for _ in range(PROMOTE_AFTER):
        keyed(repeat, tuple([1, 2]))
    assert keyed(repeat, tuple([1, 2])) == "plain"  # an equal tuple, but another object each time


def test_kept_graphs_are_bounded_and_the_oldest_is_destroyed(setup):
    driver, repeat, _, _ = setup
    keys = [object() for _ in range(KEPT + 1)]
    for key in keys:
        for _ in range(PROMOTE_AFTER):
            keyed(repeat, key)
    assert len(driver.destroyed) == 2  # the first key's exec and graph
    assert keyed(repeat, keys[0]) == "plain" and keyed(repeat, keys[-1]) == "graph"


def test_a_stream_being_captured_gets_the_plain_launch_of_a_kept_key(setup):
    driver, repeat, _, _ = setup
    key = object()
    for _ in range(PROMOTE_AFTER):
        keyed(repeat, key)
    driver.capturing = True
    assert repeat.launch_kept(key, 0x55) is None
