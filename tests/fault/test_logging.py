"""PYMSCCLPP_DEBUG levels and subsystems produce output through Python logging (subprocesses: it is read once)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time

import pytest

SCRIPT = """
from pymscclpp import Communicator
from pymscclpp.runtime.bootstrap import TcpBootstrap, get_unique_id
comm = Communicator(TcpBootstrap(0, 1, get_unique_id("127.0.0.1")))
comm.close()
"""


def _run(debug: str | None, **extra) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYMSCCLPP_", "RANK", "PMI_", "OMPI_"))}
    env.update(PYMSCCLPP_BACKEND="sim", **extra)
    if debug is not None:
        env["PYMSCCLPP_DEBUG"] = debug
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60)


def _lines(proc) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("[pymscclpp ")]


def test_info_level_logs_setup_of_every_subsystem_with_rank_prefix_and_no_debug_lines():
    proc = _run("INFO", RANK="3")
    assert proc.returncode == 0, proc.stderr
    lines = _lines(proc)
    assert any(l.startswith("[pymscclpp r3 pymscclpp.comm INFO] rank 0/1 up on sim") for l in lines), proc.stderr
    assert any("pymscclpp.bootstrap INFO] root" in l for l in lines), proc.stderr
    assert not [l for l in lines if " DEBUG]" in l], lines


def test_debug_level_for_one_subsystem_logs_only_that_subsystem():
    proc = _run("DEBUG:bootstrap")
    assert proc.returncode == 0, proc.stderr
    lines = _lines(proc)
    assert any("pymscclpp.bootstrap DEBUG] rank 0 of 1: TCP bootstrap connected" in l for l in lines), proc.stderr
    assert lines and all(" pymscclpp.bootstrap " in l for l in lines), lines


@pytest.mark.parametrize("debug", [None, "WARN", "ERROR"])
def test_quiet_levels_print_nothing_for_a_healthy_run(debug):
    proc = _run(debug)
    assert proc.returncode == 0, proc.stderr
    assert not _lines(proc) and "pymscclpp" not in proc.stderr, proc.stderr


def test_bad_level_fails_at_import_naming_the_variable():
    proc = _run("CHATTY")
    assert proc.returncode == 1
    assert "PYMSCCLPP_DEBUG='CHATTY': expected LEVEL or LEVEL:subsystem,... with LEVEL one of ERROR" in proc.stderr, \
        proc.stderr


def test_library_records_reach_python_logging_handlers(caplog):
    """Without PYMSCCLPP_DEBUG, records still flow to the application's own logging (here caplog)."""
    from pymscclpp.runtime.bootstrap.local import LocalBootstrap
    from pymscclpp.runtime.liveness import LivenessMonitor
    caplog.set_level(logging.INFO, logger="pymscclpp")
    group = LocalBootstrap.create(2, timeout=10)
    monitors = [None, None]

    def start(i):
        monitors[i] = LivenessMonitor(group[i], interval=0.05, reap=False).start()

    import threading
    threads = [threading.Thread(target=start, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    group[1].close()  # rank 1 vanishes without saying goodbye
    assert monitors[0].wait_for_death(5) and 1 in monitors[0].dead()
    monitors[0].stop()
    monitors[1].stop()
    group[0].close()
    records = [r for r in caplog.records if r.name == "pymscclpp.liveness" and r.levelno == logging.ERROR]
    assert records and "rank 0: peer 1" in records[0].getMessage() and "declared dead" in records[0].getMessage()


def test_liveness_monitor_does_not_report_peers_that_stop_normally(caplog):
    from pymscclpp.runtime.bootstrap.local import LocalBootstrap
    from pymscclpp.runtime.liveness import LivenessMonitor
    import threading
    group = LocalBootstrap.create(3, timeout=10)
    monitors = [None] * 3

    def run(i):
        monitors[i] = LivenessMonitor(group[i], interval=0.05, dead_after=0.5, reap=False).start()
        time.sleep(0.8)  # several heartbeats, longer than dead_after: nobody may be declared dead
        group[i].barrier()
        monitors[i].stop()
        group[i].barrier()
        group[i].close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert all(m.dead() == {} for m in monitors), [m.dead() for m in monitors]
    assert "declared dead" not in caplog.text
