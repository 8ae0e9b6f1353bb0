"""The watchdog thread: logs a device error of a live communicator without a call, or aborts the process."""

import gc
import logging
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from pymscclpp import Communicator
from pymscclpp.errors import InvalidUsageError
from pymscclpp.runtime import watchdog
from pymscclpp.runtime.bootstrap.local import LocalBootstrap

# a timed-out packet wait: state 1, op 2, rank 0, peer 1, channel 3, expected 5, seen 4, block 0
TIMEOUT_WORDS = np.array([1, 2, 0, 1, 3, 5, 4, 0], np.int64)


@pytest.fixture
def comm():
    c = Communicator(LocalBootstrap.create(1)[0])
    yield c
    c.close()


def test_a_recorded_error_is_logged_once_naming_rank_peer_channel_and_op(comm, caplog):
    assert watchdog.poll() == []
    comm.error_area.copy_to_device(TIMEOUT_WORDS)
    with caplog.at_level(logging.ERROR, logger="pymscclpp.watchdog"):
        found = watchdog.poll()
        assert watchdog.poll() == []  # the same error is not logged again
    assert len(found) == 1 and "rank 0" in found[0] and "peer 1" in found[0] and "channel 3" in found[0]
    assert "packet wait" in found[0] and len(caplog.records) == 1
    comm.error_area.copy_to_device(np.zeros(8, np.int64))
    assert watchdog.poll() == []


def test_the_error_stays_for_the_next_check_to_raise_by_default(comm):
    comm.error_area.copy_to_device(TIMEOUT_WORDS)
    watchdog.poll()
    with pytest.raises(Exception, match="channel 3 with peer 1 timed out"):
        comm.check_device_errors()


def test_closed_and_dropped_communicators_are_no_longer_watched():
    closed, dropped = (Communicator(LocalBootstrap.create(1)[0]) for _ in range(2))
    for c in (closed, dropped):
        c.error_area.copy_to_device(TIMEOUT_WORDS)
    closed.close()
    del dropped, c
    gc.collect()
    assert watchdog.poll() == []


def test_bad_async_error_handling_value_fails_at_construction(monkeypatch):
    monkeypatch.setenv(watchdog.ENV, "sometimes")
    with pytest.raises(InvalidUsageError, match="PYMSCCLPP_ASYNC_ERROR_HANDLING"):
        Communicator(LocalBootstrap.create(1)[0])


def test_abort_mode_ends_the_process_with_the_error_within_seconds():
    code = textwrap.dedent("""
        import time, numpy as np
        from pymscclpp import Communicator
        from pymscclpp.runtime import watchdog
        from pymscclpp.runtime.bootstrap.local import LocalBootstrap
        watchdog.POLL_S = 0.05
        comm = Communicator(LocalBootstrap.create(1)[0])
        comm.error_area.copy_to_device(np.array([1, 2, 0, 1, 3, 5, 4, 0], np.int64))
        time.sleep(10)
        print("still alive")
    """)
    env = {**os.environ, "PYMSCCLPP_BACKEND": "sim", watchdog.ENV: "abort"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "still alive" not in proc.stdout
    assert "channel 3 with peer 1 timed out" in proc.stderr and "aborting the process" in proc.stderr
