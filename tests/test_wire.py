"""Fuzzing of the bootstrap frame parser: any bytes give a valid frame or BootstrapError, nothing else."""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pymscclpp.errors import BootstrapError, InvalidUsageError
from pymscclpp.runtime.bootstrap import wire

LIMIT = 1 << 16
kinds = st.sampled_from(list(wire.Kind))
ranks = st.integers(0, 2**32 - 1)
tags = st.integers(0, 2**64 - 1)
payloads = st.binary(max_size=256)


def parse_or_error(buf: bytes):
    """The frame decoded from ``buf``, or None when it was refused with BootstrapError."""
    try:
        frame = wire.decode(buf, LIMIT)
    except BootstrapError:
        return None
    assert isinstance(frame, wire.Frame)
    assert wire.encode(*frame) == bytes(buf), "a frame accepted must re-encode to the same bytes"
    return frame


@given(kinds, ranks, tags, payloads)
def test_encoded_frames_decode_to_the_same_fields(kind, src, tag, payload):
    assert wire.decode(wire.encode(kind, src, tag, payload), LIMIT) == (kind, src, tag, payload)


@given(st.binary(max_size=200))
def test_random_bytes_decode_to_a_frame_or_raise_bootstrap_error(buf):
    parse_or_error(buf)


@given(st.binary(min_size=wire.HEADER_SIZE - 8, max_size=wire.HEADER_SIZE).map(lambda b: wire.MAGIC + b), payloads)
def test_random_headers_after_a_good_magic_decode_or_raise_bootstrap_error(header, payload):
    parse_or_error(header + payload)


@settings(max_examples=300)
@given(kinds, ranks, tags, payloads, st.data())
def test_mutated_frames_decode_to_a_frame_or_raise_bootstrap_error(kind, src, tag, payload, data):
    buf = bytearray(wire.encode(kind, src, tag, payload))
    for _ in range(data.draw(st.integers(1, 4))):
        how = data.draw(st.sampled_from(["flip", "truncate", "extend", "splice"]))
        if how == "flip" and buf:
            i = data.draw(st.integers(0, len(buf) - 1))
            buf[i] ^= data.draw(st.integers(1, 255))
        elif how == "truncate":
            del buf[data.draw(st.integers(0, len(buf))):]
        elif how == "extend":
            buf += data.draw(st.binary(min_size=1, max_size=16))
        elif how == "splice":
            i = data.draw(st.integers(0, len(buf)))
            buf[i:i] = data.draw(st.binary(min_size=1, max_size=8))
    parse_or_error(bytes(buf))


@pytest.mark.parametrize("field, value, message", [
    (0, b"XXXX", "magic"),
    (1, wire.VERSION + 1, "version"),
    (2, 99, "kind"),
    (3, 1, "reserved"),
    (6, LIMIT + 1, "exceeds the limit"),
])
def test_each_bad_header_field_is_named_in_the_error(field, value, message):
    fields = [wire.MAGIC, wire.VERSION, wire.Kind.DATA, 0, 1, 2, 0]
    fields[field] = value
    with pytest.raises(BootstrapError, match=message):
        wire.decode(struct.pack("!4sBBHIQQ", *fields), LIMIT)


def test_truncated_and_overlong_frames_are_refused():
    frame = wire.encode(wire.Kind.DATA, 1, 2, b"abcd")
    with pytest.raises(BootstrapError, match="truncated frame header"):
        wire.decode(frame[:wire.HEADER_SIZE - 1])
    with pytest.raises(BootstrapError, match="truncated frame payload"):
        wire.decode(frame[:-1])
    with pytest.raises(BootstrapError, match="trailing bytes"):
        wire.decode(frame + b"!")


@given(st.binary(max_size=64), st.integers(0, 4096))
def test_table_and_address_parsers_raise_only_bootstrap_error(buf, size):
    for parse in (wire.unpack_addr, wire.decode_register, lambda b: wire.decode_table(b, size)):
        try:
            parse(buf)
        except BootstrapError:
            pass


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "10.1.2.3", "fe80::1"])
def test_addresses_round_trip_through_their_record(host):
    assert wire.unpack_addr(wire.pack_addr(host, 4242)) == (host, 4242)
    assert wire.decode_register(wire.encode_register(7, host, 1)) == (7, host, 1)


def test_max_payload_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(wire.MAX_PAYLOAD_ENV, raising=False)
    assert wire.max_payload() == 256 << 20
    monkeypatch.setenv(wire.MAX_PAYLOAD_ENV, "4096")
    assert wire.max_payload() == 4096
    for bad in ("lots", "0", "-5"):
        monkeypatch.setenv(wire.MAX_PAYLOAD_ENV, bad)
        with pytest.raises(InvalidUsageError, match=wire.MAX_PAYLOAD_ENV):
            wire.max_payload()
