"""The two protocols by pymscclpp's names, ``packet`` (LL16 packets, data with an inline flag, into scratch) and
``simple`` (puts, then a signal), and by the MSCCL++ plan format's, ``LL`` and ``Simple``: plan files keep those
(and the MSCCL++-compatible DSL takes them), everything else says ``packet``/``simple``."""

from __future__ import annotations

PACKET, SIMPLE = "packet", "simple"
PLAN_SPELLING = {PACKET: "LL", SIMPLE: "Simple"}  # how a plan file writes each
_NAMES = {PACKET: PACKET, SIMPLE: SIMPLE, "LL": PACKET, "Simple": SIMPLE}


def protocol_name(protocol) -> str:
    """``protocol`` by pymscclpp's name (``packet``/``simple``), given that or a plan file's ``LL``/``Simple``."""
    name = _NAMES.get(protocol) if isinstance(protocol, str) else None
    if name is None:
        raise ValueError(f"protocol must be 'packet' or 'simple' (in a plan file: 'LL' or 'Simple'), got {protocol!r}")
    return name
