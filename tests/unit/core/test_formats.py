"""Internal record layouts: exact bytes (MM2's for Checkpoint, Heartbeat, OffsetSync; ours for
OffsetSegment), round trips, and clear errors on bad input."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkmirror.core import Checkpoint, FormatError, Heartbeat, OffsetSegment, OffsetSync
from sparkmirror.errors import SparkMirrorError


def _hex(*parts: str) -> bytes:
    return bytes.fromhex("".join(parts))


# -- exact bytes (hand-computed: INT16/32/64 big endian, STRING = INT16 length + UTF-8) ----------


def test_checkpoint_bytes() -> None:
    cp = Checkpoint("g1", "A.t", 3, upstream_offset=10, downstream_offset=20, metadata="m")
    assert cp.key_bytes() == _hex("0002 6731", "0003 412e74", "00000003")
    assert cp.value_bytes() == _hex("0000", "000000000000000a", "0000000000000014", "0001 6d")
    assert Checkpoint.decode(cp.key_bytes(), cp.value_bytes()) == cp


def test_checkpoint_bytes_empty_metadata_and_utf8() -> None:
    cp = Checkpoint("é", "t", 0, 0, 1)
    assert cp.key_bytes() == _hex("0002 c3a9", "0001 74", "00000000")
    assert cp.value_bytes() == _hex("0000", "0000000000000000", "0000000000000001", "0000")


def test_heartbeat_bytes() -> None:
    hb = Heartbeat("A", "B", 0x0102030405060708)
    assert hb.key_bytes() == _hex("0001 41", "0001 42")
    assert hb.value_bytes() == _hex("0000", "0102030405060708")
    assert Heartbeat.decode(hb.key_bytes(), hb.value_bytes()) == hb


def test_offset_sync_bytes_have_no_version_field() -> None:
    # Kafka's OffsetSync value schema is (upstreamOffset INT64, offset INT64) and nothing else.
    sync = OffsetSync("t", 7, upstream_offset=5, downstream_offset=-1)
    assert sync.key_bytes() == _hex("0001 74", "00000007")
    assert sync.value_bytes() == _hex("0000000000000005", "ffffffffffffffff")
    assert len(sync.value_bytes()) == 16
    assert OffsetSync.decode(sync.key_bytes(), sync.value_bytes()) == sync


def test_offset_segment_bytes() -> None:
    seg = OffsetSegment("t", 1, upstream_start=100, downstream_start=200, count=3, written_at_ms=1700000000000)
    assert seg.key_bytes() == _hex("0000", "0001 74", "00000001", "0000000000000064")
    assert seg.value_bytes() == _hex(
        "0000", "0000000000000064", "00000000000000c8", "0000000000000003", "0000018bcfe56800"
    )
    assert OffsetSegment.decode(seg.key_bytes(), seg.value_bytes()) == seg
    assert OffsetSegment.encode_key("t", 1, 100) == seg.key_bytes()
    assert OffsetSegment.decode_key(seg.key_bytes()) == ("t", 1, 100)


def test_offset_segment_key_is_the_replacement_key() -> None:
    # A replay from the same upstream start has the same key (compaction replaces it); any
    # other start has another key.
    a = OffsetSegment("t", 0, 5, 10, 4, 1)
    b = OffsetSegment("t", 0, 5, 90, 7, 2)
    c = OffsetSegment("t", 0, 6, 11, 3, 1)
    assert a.key_bytes() == b.key_bytes()
    assert a.key_bytes() != c.key_bytes()


# -- errors ---------------------------------------------------------------------------------


def test_unknown_version_is_named() -> None:
    cp = Checkpoint("g", "t", 0, 1, 2)
    value = b"\x00\x01" + cp.value_bytes()[2:]
    with pytest.raises(FormatError, match=r"Checkpoint value: unknown version 1 \(this build reads version 0\)"):
        Checkpoint.decode(cp.key_bytes(), value)
    hb = Heartbeat("A", "B", 1)
    with pytest.raises(FormatError, match="Heartbeat value: unknown version 2"):
        Heartbeat.decode(hb.key_bytes(), b"\x00\x02" + hb.value_bytes()[2:])
    seg = OffsetSegment("t", 0, 1, 2, 3, 4)
    with pytest.raises(FormatError, match="OffsetSegment key: unknown version 9"):
        OffsetSegment.decode(b"\x00\x09" + seg.key_bytes()[2:], seg.value_bytes())
    with pytest.raises(FormatError, match="OffsetSegment value: unknown version -1"):
        OffsetSegment.decode(seg.key_bytes(), b"\xff\xff" + seg.value_bytes()[2:])


def test_truncated_bytes_name_the_field() -> None:
    cp = Checkpoint("group", "t", 0, 1, 2, "meta")
    with pytest.raises(FormatError, match="Checkpoint key: truncated in field group"):
        Checkpoint.decode(cp.key_bytes()[:4], cp.value_bytes())
    with pytest.raises(FormatError, match="Checkpoint key: truncated in field partition"):
        Checkpoint.decode(cp.key_bytes()[:-1], cp.value_bytes())
    with pytest.raises(FormatError, match="Checkpoint value: truncated in field offset"):
        Checkpoint.decode(cp.key_bytes(), cp.value_bytes()[:12])
    with pytest.raises(FormatError, match="Heartbeat value: truncated in field version"):
        Heartbeat.decode(Heartbeat("A", "B", 0).key_bytes(), b"\x00")
    with pytest.raises(FormatError, match="OffsetSync value: truncated in field upstreamOffset"):
        OffsetSync.decode(OffsetSync("t", 0, 1, 2).key_bytes(), b"")
    seg = OffsetSegment("t", 0, 1, 2, 3, 4)
    with pytest.raises(FormatError, match="OffsetSegment value: truncated in field written_at_ms"):
        OffsetSegment.decode(seg.key_bytes(), seg.value_bytes()[:-3])


def test_trailing_bytes_are_rejected() -> None:
    sync = OffsetSync("t", 0, 1, 2)
    with pytest.raises(FormatError, match="OffsetSync value: 2 unexpected trailing bytes"):
        OffsetSync.decode(sync.key_bytes(), sync.value_bytes() + b"\x00\x00")


def test_null_key_or_value_is_named() -> None:
    with pytest.raises(FormatError, match="OffsetSegment value is null"):
        OffsetSegment.decode(OffsetSegment.encode_key("t", 0, 1), None)
    with pytest.raises(FormatError, match="Checkpoint key is null"):
        Checkpoint.decode(None, b"")


def test_negative_string_length_and_bad_utf8() -> None:
    with pytest.raises(FormatError, match="null strings are not allowed"):
        Heartbeat.decode(b"\xff\xff", Heartbeat("A", "B", 0).value_bytes())
    with pytest.raises(FormatError, match="not valid UTF-8"):
        Heartbeat.decode(b"\x00\x01\xff\x00\x00", Heartbeat("A", "B", 0).value_bytes())


def test_encode_rejects_what_the_protocol_cannot_hold() -> None:
    with pytest.raises(FormatError, match="at most 32767"):
        Checkpoint("g" * 40000, "t", 0, 0, 0).key_bytes()
    with pytest.raises(FormatError, match="does not fit in INT32"):
        OffsetSync("t", 2**31, 0, 0).key_bytes()
    with pytest.raises(FormatError, match="count must be >= 1"):
        OffsetSegment("t", 0, 0, 0, 0, 0).value_bytes()


def test_offset_segment_key_and_value_must_agree() -> None:
    key = OffsetSegment.encode_key("t", 0, 5)
    value = OffsetSegment("t", 0, 6, 0, 1, 0).value_bytes()
    with pytest.raises(FormatError, match="key says upstream_start=5, value says 6"):
        OffsetSegment.decode(key, value)
    zero = b"\x00\x00" + (5).to_bytes(8, "big") + (0).to_bytes(8, "big") * 3
    with pytest.raises(FormatError, match="count=0 < 1"):
        OffsetSegment.decode(key, zero)


def test_format_error_is_a_terminal_sparkmirror_error_and_pickles() -> None:
    err = FormatError("Checkpoint value: unknown version 3")
    assert isinstance(err, SparkMirrorError)
    assert err.retriable is False
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is FormatError and str(back) == str(err)


# -- round trips ----------------------------------------------------------------------------

_TEXT = st.text(max_size=30)
_I32 = st.integers(-(2**31), 2**31 - 1)
_I64 = st.integers(-(2**63), 2**63 - 1)
_NONNEG = st.integers(0, 2**63 - 1)


@given(_TEXT, _TEXT, _I32, _I64, _I64, _TEXT)
def test_checkpoint_round_trip(group: str, topic: str, p: int, up: int, down: int, meta: str) -> None:
    cp = Checkpoint(group, topic, p, up, down, meta)
    assert Checkpoint.decode(cp.key_bytes(), cp.value_bytes()) == cp


@given(_TEXT, _TEXT, _I64)
def test_heartbeat_round_trip(source: str, target: str, ts: int) -> None:
    hb = Heartbeat(source, target, ts)
    assert Heartbeat.decode(hb.key_bytes(), hb.value_bytes()) == hb


@given(_TEXT, _I32, _I64, _I64)
def test_offset_sync_round_trip(topic: str, p: int, up: int, down: int) -> None:
    sync = OffsetSync(topic, p, up, down)
    assert OffsetSync.decode(sync.key_bytes(), sync.value_bytes()) == sync


@given(_TEXT, st.integers(0, 2**31 - 1), _NONNEG, _NONNEG, st.integers(1, 2**63 - 1), _I64)
def test_offset_segment_round_trip(topic: str, p: int, us: int, ds: int, count: int, at: int) -> None:
    seg = OffsetSegment(topic, p, us, ds, count, at)
    assert OffsetSegment.decode(seg.key_bytes(), seg.value_bytes()) == seg


@given(st.binary(max_size=40), st.binary(max_size=40))
def test_garbage_raises_format_error_only(key: bytes, value: bytes) -> None:
    for cls in (Checkpoint, Heartbeat, OffsetSync, OffsetSegment):
        try:
            cls.decode(key, value)
        except FormatError:
            pass


def _generic_segment(key: bytes, value: bytes | None) -> object:
    """What the field-by-field reader makes of an offset-map record (or the error it raises)."""
    from sparkmirror.core.formats import _read_versioned

    try:
        _, k = _read_versioned(key, {0: OffsetSegment.KEY_SCHEMA_V0}, what="OffsetSegment key")
        if value is None:
            return k
        _, v = _read_versioned(value, {0: OffsetSegment.VALUE_SCHEMA_V0}, what="OffsetSegment value")
        if v[0] != k[2] or v[2] < 1:
            return FormatError
        return OffsetSegment(k[0], k[1], k[2], v[1], v[2], v[3])  # type: ignore[arg-type]
    except FormatError:
        return FormatError


def _segment_records() -> st.SearchStrategy[tuple[bytes, bytes]]:
    whole = st.builds(
        lambda seg: (seg.key_bytes(), seg.value_bytes()),
        st.builds(OffsetSegment, _TEXT, st.integers(0, 2**31 - 1), _NONNEG, _NONNEG, st.integers(1, 2**63 - 1), _I64),
    )
    # Whole records with a byte changed, cut short or extended: the one-unpack path must not take those.
    damaged = st.tuples(whole, st.integers(0, 60), st.integers(0, 255), st.sampled_from(["set", "cut", "add"])).map(
        lambda t: _damage(*t)
    )
    return st.one_of(whole, damaged, st.tuples(st.binary(max_size=40), st.binary(max_size=40)))


def _damage(record: tuple[bytes, bytes], at: int, byte: int, how: str) -> tuple[bytes, bytes]:
    key, value = record
    data = bytearray(key + value)
    i = at % len(data)
    if how == "set":
        data[i] = byte
    elif how == "cut":
        del data[i]
    else:
        data.insert(i, byte)
    split = len(key) if i >= len(key) or how == "set" else len(key) + (1 if how == "add" else -1)
    return bytes(data[:split]), bytes(data[split:])


@given(_segment_records())
def test_offset_segment_fast_decode_agrees_with_the_field_reader(record: tuple[bytes, bytes]) -> None:
    """The one-unpack reading of version-0 offset-map records (the map's load at start) gives what
    the generic reader gives, and raises where it raises."""
    key, value = record
    for v in (value, None):
        try:
            got: object = OffsetSegment.decode(key, v) if v is not None else OffsetSegment.decode_key(key)
        except FormatError:
            got = FormatError
        assert got == _generic_segment(key, v)


@given(_TEXT, st.integers(-(2**32), 2**32), st.integers(-(2**64), 2**64), st.integers(-(2**64), 2**64), _I64)
def test_offset_segment_fast_encode_agrees_with_the_field_writer(topic: str, p: int, us: int, ds: int, at: int) -> None:
    """The one-pack writing of a segment (one per partition per commit interval) gives the generic
    writer's bytes, and raises where it raises."""
    seg = OffsetSegment(topic, p, us, ds, 1, at)
    for fast, generic in (
        (seg.key_bytes, lambda: OffsetSegment.KEY_SCHEMA_V0.write((topic, p, us), what="OffsetSegment key")),
        (seg.value_bytes, lambda: OffsetSegment.VALUE_SCHEMA_V0.write((us, ds, 1, at), what="OffsetSegment value")),
    ):
        try:
            want: object = b"\x00\x00" + generic()
        except FormatError as exc:
            want = str(exc)
        try:
            got: object = fast()
        except FormatError as exc:
            got = str(exc)
        assert got == want
