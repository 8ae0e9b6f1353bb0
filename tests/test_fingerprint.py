"""The call fingerprint the one-shot kernels compare: packing round-trips, saturates, and reads well."""

from __future__ import annotations

import itertools

import pytest

from pymscclpp.runtime import fingerprint as fpr


@pytest.mark.parametrize("collective, dtype, op", list(itertools.product(fpr.COLLECTIVES, fpr.DTYPES, fpr.OPS)))
def test_packing_round_trips_every_collective_dtype_and_op(collective, dtype, op):
    for count, root in ((1, 0), (1000, 3), ((1 << 40) - 2, 2046)):
        fp = fpr.pack(collective, count * fpr.DTYPES[dtype], dtype, op, root)
        assert 0 < fp < 1 << 63  # a positive int64; 0 means "check off"
        assert fpr.unpack(fp) == fpr.Fingerprint(collective, count, dtype, op, root)


def test_fields_that_do_not_fit_saturate_and_say_so():
    fp = fpr.pack("broadcast", 1 << 44, "uint8", "sum", 1 << 20)
    assert fpr.unpack(fp).count == (1 << 40) - 1 and fpr.unpack(fp).root == 2047
    assert fpr.describe(fp) == "broadcast of at least 1099511627775 uint8 from root 2047"


def test_an_unlisted_dtype_is_counted_in_bytes():
    fp = fpr.pack("all_gather", 96, "float128", "sum", 0)
    assert fpr.unpack(fp) == fpr.Fingerprint("all_gather", 96, None, "sum", 0)
    assert fpr.describe(fp) == "all_gather of 96 bytes of an unlisted dtype"


def test_any_field_that_differs_changes_the_fingerprint():
    base = ("all_reduce", 4096, "float32", "sum", 0)
    variants = [("all_gather", 4096, "float32", "sum", 0), ("all_reduce", 8192, "float32", "sum", 0),
                ("all_reduce", 4096, "int32", "sum", 0), ("all_reduce", 4096, "float32", "max", 0),
                ("all_reduce", 4096, "float32", "sum", 1)]
    assert len({fpr.pack(*v) for v in [base] + variants}) == 6


def test_the_mismatch_text_names_both_sides():
    ours, theirs = fpr.pack("all_reduce", 4096, "float32", "sum", 0), fpr.pack("all_reduce", 8192, "float32", "sum", 0)
    assert fpr.mismatch_text(0, 1, ours, theirs, 5).startswith(
        "rank 0 called all_reduce of 1024 float32, rank 1 called all_reduce of 2048 float32: ")
