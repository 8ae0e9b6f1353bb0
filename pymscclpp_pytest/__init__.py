"""The pytest plugin of ``pymscclpp.testing`` (entry point ``pytest11``): the ``ranks`` fixture factory.

A package of its own so that pytest loading it imports no pymscclpp: the backend is chosen when pymscclpp is
first imported, which must come after the tests' conftest has set PYMSCCLPP_BACKEND.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ranks():
    """``ranks(n, **options)``: a pool of ``n`` ranks (``pymscclpp.testing.ranks`` options), made on first use
    and kept for the session, so every test and hypothesis example asking for the same pool reuses it."""
    from pymscclpp.testing import ranks as make
    pools: dict = {}

    def pool(n: int, **options):
        key = (n, repr(sorted(options.items())))
        if key not in pools:
            pools[key] = make(n, **options)
        return pools[key]
    yield pool
    for p in pools.values():
        p.close()
