"""The fingerprint of a collective call that peers compare on the device before touching data, and its text.

One non-negative int64: bits 0-39 the element count of the send buffer (saturating at 2^40 - 1), 40-50 the
root (rooted collectives; saturating at 2047), 51-53 the op (1 + its index in ``OPS``), 54-58 the dtype (1 + its
index in ``DTYPES``; 0 an unlisted dtype, whose count is then in bytes), 59-62 the collective (1 + its index
in ``COLLECTIVES``; ``send_recv`` and ``all_to_allv`` describe what one rank sends one peer, ``algos.exchange``).
Never 0, which kernels read as "check off". A call that runs zero-copy (``zero_copy``) says so: collectives
without a root in their root field (``REGISTERED``; ``PUSHED`` for a kernel that writes into peers' outputs
where another reads peers' inputs), broadcast, which reduces nothing, in its op field, reduce in the top bit of
its root field (``REDUCE_MARK``: its root saturates at 1023, and a zero-copy call runs on one host, so on fewer
ranks), so ranks that disagree on it (one registered the buffers it calls with, another did not) fail the check.
"""

from __future__ import annotations

import functools
from typing import NamedTuple, Sequence

from .collectives import CALLS as COLLECTIVES, ROOTED

DTYPES = {"float32": 4, "bfloat16": 2, "float16": 2, "int32": 4, "uint8": 1, "float64": 8, "int64": 8,
          "int16": 2, "int8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "bool": 1, "complex64": 8,
          "complex128": 16, "float8_e4m3fn": 1, "float8_e5m2": 1}  # name: item size
OPS = ("sum", "min", "max", "prod", "avg")
COUNT_BITS, ROOT_BITS, OP_BITS, DTYPE_BITS, COLLECTIVE_BITS = 40, 11, 3, 5, 4
_ROOT_AT = COUNT_BITS
_OP_AT = _ROOT_AT + ROOT_BITS
_DTYPE_AT = _OP_AT + OP_BITS
_COLLECTIVE_AT = _DTYPE_AT + DTYPE_BITS
_DTYPE_NAMES = tuple(DTYPES)
REGISTERED = 1 << _ROOT_AT  # OR-ed into a zero-copy call's fingerprint (not a rooted one's)
PUSHED = 2 << _ROOT_AT  # instead, for a zero-copy call whose kernel writes into peers' outputs
REDUCE_MARK = 1 << (_ROOT_AT + ROOT_BITS - 1)  # OR-ed into a zero-copy reduce's fingerprint
_REDUCE_ROOT_BITS = ROOT_BITS - 1
_ZERO_COPY_OP = (1 << OP_BITS) - 1  # the op field of a zero-copy broadcast's fingerprint (no op has this code)
_OP_MASK = _ZERO_COPY_OP << _OP_AT


class Fingerprint(NamedTuple):
    """A call as its fingerprint holds it: ``dtype`` None for an unlisted one (``count`` then in bytes)."""

    collective: str
    count: int
    dtype: str | None
    op: str
    root: int


def _field(value: int, bits: int) -> int:
    return min(value, (1 << bits) - 1)


@functools.lru_cache(maxsize=256)
def pack(collective: str, nbytes: int, dtype: str, op: str, root: int) -> int:
    """The fingerprint of ``collective`` sending ``nbytes`` of ``dtype`` with ``op`` from ``root``."""
    itemsize = DTYPES.get(dtype)
    dtype_code = 0 if itemsize is None else _DTYPE_NAMES.index(dtype) + 1
    count = nbytes if itemsize is None else nbytes // itemsize
    op_code = OPS.index(op) + 1 if op in OPS else 0
    return ((COLLECTIVES.index(collective) + 1) << _COLLECTIVE_AT | dtype_code << _DTYPE_AT | op_code << _OP_AT
            | _field(root, _REDUCE_ROOT_BITS if collective == "reduce" else ROOT_BITS) << _ROOT_AT
            | _field(count, COUNT_BITS))


def zero_copy(fp: int, pushes: bool = False) -> int:
    """``fp`` marked as a call that runs zero-copy (0, the check off, stays 0); ``pushes``: by writes into peers'
    outputs (a rank pulling and a rank pushing would each leave the other's part unmoved)."""
    if not fp:
        return 0
    collective = unpack(fp).collective
    if collective == "broadcast":
        return fp & ~_OP_MASK | _ZERO_COPY_OP << _OP_AT
    if collective == "reduce":
        return fp | REDUCE_MARK
    if collective in ROOTED:
        raise ValueError(f"{unpack(fp).collective} has no zero-copy mark")
    return fp | (PUSHED if pushes else REGISTERED)


WINDOW_BITS = 12  # a windows tag's field per window: its registration serial + 2 (1: mapped at a captured call)
_TAG_IN_PLACE = 1 << 48  # and whether the call is in place where that moves its bytes in its windows
_TAG_COLLECTIVE_AT = 56  # and the collective (1 + its index), for the error text


def windows_tag(collective: str, serials: Sequence[int], in_place: bool = False) -> int:
    """The registrations a zero-copy ``collective`` reaches its peers' buffers through (``algos.windows`` serials
    in the call's order, -1 for a captured call's), and ``in_place`` where that moves where peers find its bytes
    (an all-gather's), as a nonzero int64 its ranks compare after agreeing fingerprints: ranks whose buffers are of
    different registrations, or laid out differently, would read and write the wrong peer bytes."""
    tag = (COLLECTIVES.index(collective) + 1) << _TAG_COLLECTIVE_AT | (_TAG_IN_PLACE if in_place else 0)
    for i, serial in enumerate(serials):
        tag |= (serial + 2) << (WINDOW_BITS * i)
    return tag


def _windows(tag: int) -> str:
    """``all_reduce on buffers of registrations 0 and 3`` (``all_gather in place on ...``) of a windows tag."""
    collective = tag >> _TAG_COLLECTIVE_AT
    name = COLLECTIVES[collective - 1] if 0 < collective <= len(COLLECTIVES) else f"collective {collective}"
    if tag & _TAG_IN_PLACE:
        name += " in place"
    tag &= (1 << (WINDOW_BITS * 4)) - 1
    codes = []
    while tag:
        codes.append(tag & ((1 << WINDOW_BITS) - 1))
        tag >>= WINDOW_BITS
    if all(code == 1 for code in codes):
        return f"{name} on buffers mapped when captured"
    parts = [f"{code - 2}" if code > 1 else "one mapped when captured" for code in codes]
    return f"{name} on buffers of registration{'s' if len(parts) > 1 else ''} {' and '.join(parts)}"


def windows_mismatch_text(rank: int, peer: int, ours: int, theirs: int, seq: int) -> str:
    """What a rank reports when a zero-copy call's fingerprints agreed but its buffers and ``peer``'s are of
    different registrations (windows tags ``ours`` and ``theirs``)."""
    return (f"rank {rank} called {_windows(ours)}, rank {peer} called {_windows(theirs)} (zero-copy): the ranks' "
            f"calls do not match (checked call {seq} of the communicator; found on the device before any output was "
            "written). A zero-copy call reaches each peer's buffer of the registration its own buffer belongs to "
            "(register_buffer pairs every rank's k-th registration), so for each argument every rank passes a "
            "buffer of the same registration")


def is_zero_copy(fp: int) -> bool:
    """Whether ``fp`` is marked by ``zero_copy``."""
    collective = unpack(fp).collective
    if collective == "reduce":
        return bool(fp & REDUCE_MARK)
    if collective in ROOTED:  # broadcast's mark is in its op field (gather and scatter have none)
        return (fp & _OP_MASK) == _ZERO_COPY_OP << _OP_AT
    return bool(fp & (REGISTERED | PUSHED))


def unpack(fp: int) -> Fingerprint:
    """The fields of fingerprint ``fp``."""
    def get(at: int, bits: int) -> int:
        return (fp >> at) & ((1 << bits) - 1)

    collective, dtype, op = get(_COLLECTIVE_AT, COLLECTIVE_BITS), get(_DTYPE_AT, DTYPE_BITS), get(_OP_AT, OP_BITS)
    name = COLLECTIVES[collective - 1] if 0 < collective <= len(COLLECTIVES) else f"collective {collective}"
    return Fingerprint(name, get(0, COUNT_BITS), _DTYPE_NAMES[dtype - 1] if 0 < dtype <= len(_DTYPE_NAMES) else None,
                       OPS[op - 1] if 0 < op <= len(OPS) else f"op {op}",
                       get(_ROOT_AT, _REDUCE_ROOT_BITS if name == "reduce" else ROOT_BITS))


def describe(fp: int) -> str:
    """``all_reduce of 1024 float32`` (an op other than sum named: ``... with op max``), ``broadcast of 8 int32
    from root 1``, ``gather of 4 float32 to root 0``, ..."""
    f = unpack(fp)
    at_least = "at least " if f.count == (1 << COUNT_BITS) - 1 else ""
    what = f"{f.count} {f.dtype}" if f.dtype is not None else f"{f.count} bytes of an unlisted dtype"
    text = f"{f.collective} of {at_least}{what}"
    if f.collective in ("all_reduce", "reduce_scatter", "reduce") and f.op != "sum":
        text += f" with op {f.op}"
    if f.collective in ROOTED:
        text += f" {'to' if f.collective in ('reduce', 'gather') else 'from'} root {f.root}"
    if is_zero_copy(fp):
        pushed = f.collective not in ROOTED and fp & PUSHED
        text += " on registered buffers (zero-copy, writing into peers' outputs)" if pushed else \
            " on registered buffers (zero-copy)"
    return text


_FOUND = {"kernel": "found on the device before any output was written",
          "ahead": "found by the check kernel ahead of the algorithm's own kernel, which still runs and writes its "
                   "output unless it gates on call_agreed",
          "host": "found on the host before anything was launched: the ranks span hosts"}


def mismatch_text(rank: int, peer: int, ours: int, theirs: int, seq: int, where: str = "kernel") -> str:
    """What a rank whose call disagreed with ``peer``'s reports; ``where`` found it: the call's own ``kernel``, a
    check kernel launched ``ahead`` of a user's kernel (that kernel runs anyway), or the ``host`` (ranks on
    several hosts trade fingerprints over the bootstrap)."""
    return (f"rank {rank} called {describe(ours)}, rank {peer} called {describe(theirs)}: the ranks' calls do not "
            f"match (checked call {seq} of the communicator; {_FOUND[where]})")


def _moved(fp: int) -> str:
    """``1024 float32`` (nothing: ``nothing``) of a pair descriptor (``algos.exchange``), with its verb."""
    f = unpack(fp)
    what = "nothing" if f.count == 0 else f"{f.count} {f.dtype}" if f.dtype else f"{f.count} bytes (mixed dtypes)"
    verb = f"{f.collective} with root {f.root}" if f.collective in ROOTED else \
        f"send/recv, op sizes {f.root:#05x}" if f.collective == "send_recv" else f.collective
    return f"{what} ({verb})"


def pair_mismatch_text(rank: int, peer: int, ours: int, theirs: int, sending: bool) -> str:
    """What a rank reports when what it sends ``peer`` (``sending``) or receives from it disagrees with what the
    peer receives or sends: both sides' counts and dtypes, as their pair descriptors hold them."""
    if sending:
        sides = f"rank {rank} sends rank {peer} {_moved(ours)}, rank {peer} receives {_moved(theirs)} from rank {rank}"
    else:
        sides = f"rank {rank} receives {_moved(ours)} from rank {peer}, rank {peer} sends it {_moved(theirs)}"
    hint = ""
    if ours == theirs:  # the descriptors agree: the pair did not read zero-copy where every pair had to
        return (f"{sides}, but the pair did not read zero-copy in a call whose every pair had to (the ranks' "
                "zero-copy choices differ: an internal error; found on the device before any data moved between them)")
    if unpack(ours).collective == unpack(theirs).collective == "send_recv" and 0 in (unpack(ours).count,
                                                                                      unpack(theirs).count):
        hint = ("; a send meets the peer's recv at the same place in the two ranks' calls with each other, so post "
                "a pair's sends and receives in one comm.group()")
    return (f"{sides}: the two ranks' calls do not match (count, dtype or verb; found on the device before any "
            f"data moved between them){hint}")
