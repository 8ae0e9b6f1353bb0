"""docs/testing.md shows exactly the example tests in tests/testing_doc/ (which pytest runs)."""

from __future__ import annotations

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _blocks() -> dict[str, str]:
    with open(os.path.join(ROOT, "docs", "testing.md")) as f:
        doc = f.read()
    return dict(re.findall(r"<!-- (tests/testing_doc/\S+\.py) -->\n```python\n(.*?)```", doc, re.S))


@pytest.mark.parametrize("path", ["tests/testing_doc/test_my_kernel.py", "tests/testing_doc/test_my_algorithm.py",
                                  "tests/testing_doc/test_my_plan.py"])
def test_the_doc_shows_the_example_test_file_as_it_is(path):
    with open(os.path.join(ROOT, path)) as f:
        assert _blocks()[path] == f.read()
