"""The shared-memory registry survives a segment's finalizer running inside one of its own locked sections, as a
garbage collection there runs it (a rank once hung in Communicator() that way)."""

import threading

from pymscclpp.runtime import shm


def test_a_segment_closed_while_its_thread_holds_the_registry_lock_neither_deadlocks_nor_stays_findable():
    seg = shm.create(4096)
    base = seg.base
    assert shm.find(base, 16) == (seg, 0)
    done = threading.Event()

    def close_under_the_lock():
        with shm._lock:  # where a collection inside find() or create() runs a finalizer
            seg.close()
        done.set()

    threading.Thread(target=close_under_the_lock, daemon=True).start()
    assert done.wait(10), "a segment's finalizer run under the registry's lock deadlocked"
    assert shm.find(base, 16) is None
    again = shm.create(4096)  # the registry takes new segments after it
    assert shm.find(again.base, 16) == (again, 0)
    again.close()
