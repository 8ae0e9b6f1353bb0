"""The call fingerprint the one-shot kernels compare: packing round-trips, saturates, and reads well."""

from __future__ import annotations

import itertools

import pytest

from pymscclpp.runtime import fingerprint as fpr


@pytest.mark.parametrize("collective, dtype, op", list(itertools.product(fpr.COLLECTIVES, fpr.DTYPES, fpr.OPS)))
def test_packing_round_trips_every_collective_dtype_and_op(collective, dtype, op):
    top_root = 1022 if collective == "reduce" else 2046  # reduce's root field keeps a bit for its zero-copy mark
    for count, root in ((1, 0), (1000, 3), ((1 << 40) - 2, top_root)):
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


@pytest.mark.parametrize("collective", ["all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast",
                                        "reduce"])
def test_the_zero_copy_mark_differs_from_every_unmarked_call_and_keeps_the_fields(collective):
    roots = [0, 1, 3, 1023] if collective in ("broadcast", "reduce") else [0]
    plain = {fpr.pack(collective, 4096, "float32", op, root) for op in fpr.OPS for root in roots}
    for root in roots:
        fp = fpr.pack(collective, 4096, "float32", "sum", root)
        marked = fpr.zero_copy(fp)
        assert marked not in plain and fpr.is_zero_copy(marked) and not fpr.is_zero_copy(fp)
        assert 0 < marked < 1 << 63 and fpr.unpack(marked)[:2] == fpr.unpack(fp)[:2]
        assert fpr.describe(marked) == fpr.describe(fp) + " on registered buffers (zero-copy)"
        if collective in ("broadcast", "reduce"):
            assert fpr.unpack(marked).root == root
    assert fpr.zero_copy(0) == 0


@pytest.mark.parametrize("collective", ["all_reduce", "reduce_scatter", "all_gather", "all_to_all"])
def test_a_pushing_zero_copy_call_differs_from_a_pulling_one_and_says_so(collective):
    fp = fpr.pack(collective, 4096, "float32", "sum", 0)
    pushed, pulled = fpr.zero_copy(fp, pushes=True), fpr.zero_copy(fp)
    assert pushed not in (fp, pulled) and fpr.is_zero_copy(pushed)
    assert fpr.unpack(pushed)[:2] == fpr.unpack(fp)[:2]
    assert fpr.describe(pushed) == fpr.describe(fp) + " on registered buffers (zero-copy, writing into peers' outputs)"


@pytest.mark.parametrize("collective", ["gather", "scatter"])
def test_rooted_calls_without_a_zero_copy_kernel_have_no_zero_copy_mark(collective):
    with pytest.raises(ValueError, match=f"{collective} has no zero-copy mark"):
        fpr.zero_copy(fpr.pack(collective, 64, "float32", "sum", 1))


def test_a_reduce_root_saturates_below_the_zero_copy_mark():
    fp = fpr.pack("reduce", 64, "float32", "sum", 5000)
    assert fpr.unpack(fp).root == 1023 and not fpr.is_zero_copy(fp)


def test_a_pair_whose_descriptors_agree_but_did_not_read_zero_copy_says_so():
    fp = fpr.pack("all_to_allv", 4096, "float32", "sum", 0)
    text = fpr.pair_mismatch_text(0, 1, fp, fp, False)
    assert "did not read zero-copy" in text and "rank 1 sends it 1024 float32" in text, text


def test_windows_tags_differ_for_any_other_registration_or_order_and_name_them():
    tags = {fpr.windows_tag("all_reduce", serials) for serials in ([0], [1], [0, 1], [1, 0], [0, 0], [-1], [-1, -1],
                                                                  [2046, 2045])}
    assert len(tags) == 8 and 0 not in tags
    assert fpr.windows_tag("all_gather", [0]) != fpr.windows_tag("all_reduce", [0])
    text = fpr.windows_mismatch_text(0, 1, fpr.windows_tag("broadcast", [0, 2046]),
                                     fpr.windows_tag("broadcast", [-1]), 5)
    assert text.startswith("rank 0 called broadcast on buffers of registrations 0 and 2046, rank 1 called broadcast "
                           "on buffers mapped when captured (zero-copy): the ranks' calls do not match (checked call "
                           "5 of the communicator"), text
