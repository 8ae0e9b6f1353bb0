"""Where the proxy thread runs (pymscclpp/proxy/cpus.py): off a tight MPI core binding, near the GPU."""

from __future__ import annotations

import os

import pytest

from pymscclpp.proxy import cpus


def test_cpu_lists_parse_ranges_and_reject_malformed_ones():
    assert cpus.parse_cpulist("0-3,8, 10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert cpus.parse_cpulist("5") == {5}
    for bad in ("3-1", "a", "-2"):
        with pytest.raises(ValueError):
            cpus.parse_cpulist(bad)


ONLINE = set(range(32))
NODE0, NODE1 = set(range(16)), set(range(16, 32))


@pytest.mark.parametrize("bound, local, want", [
    ({3}, NODE0, NODE0 - {3}),                 # mpirun --bind-to core: leave that core, stay on the GPU's node
    ({3, 19}, NODE0, NODE0 - {3}),             # a core and its hyperthread
    ({3}, set(), ONLINE - {3}),                # NUMA node unknown
    (NODE0, NODE0, None),                      # bound to the node already: room enough, leave it
    (ONLINE, NODE1, NODE1),                    # unbound: narrowed to the GPU's node
    (ONLINE, set(), None),                     # unbound, node unknown: nothing to do
    ({0}, {0}, ONLINE - {0}),                  # the node is that one core: anywhere else
    ({0, 1, 2}, {0, 1, 2}, ONLINE - {0, 1, 2}),  # a small binding covering the whole node
])
def test_a_proxy_thread_leaves_a_small_binding_for_the_gpus_numa_node(bound, local, want):
    assert cpus.choose(bound, ONLINE, local) == want


def test_single_cpu_machine_keeps_its_binding():
    assert cpus.choose({0}, {0}, {0}) is None


def test_place_thread_honours_inherit_and_explicit_lists(monkeypatch):
    monkeypatch.setenv(cpus.CPUS_ENV, "inherit")
    assert cpus.place_thread(0) is None
    if not hasattr(os, "sched_setaffinity"):
        return
    before = os.sched_getaffinity(0)
    try:
        monkeypatch.setenv(cpus.CPUS_ENV, str(min(before)))
        assert cpus.place_thread(0) == {min(before)}
        monkeypatch.setenv(cpus.CPUS_ENV, "not-a-list")
        assert cpus.place_thread(0) is None
    finally:
        os.sched_setaffinity(0, before)
