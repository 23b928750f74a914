"""Binary layouts of the internal records: MM2's checkpoints, heartbeats and offset syncs,
and sparkmirror's own offset-map segments and chains.

MM2's three layouts are byte-for-byte those of Kafka's connect/mirror, so that MM2 tools,
``MirrorClient`` and ``RemoteClusterUtils.translateOffsets`` read what sparkmirror writes and
sparkmirror reads what MM2 wrote. Fields use the Kafka protocol's primitive types, all big
endian: INT16, INT32, INT64, and STRING = INT16 byte length followed by that many bytes of
UTF-8 (never null here; at most 32767 bytes).

=============  ==================================================  ===========================================
record         key                                                 value
=============  ==================================================  ===========================================
Checkpoint     group STRING, topic STRING, partition INT32         version INT16 (0), upstreamOffset INT64,
                                                                   offset INT64, metadata STRING
Heartbeat      sourceClusterAlias STRING, targetClusterAlias       version INT16 (0), timestamp INT64
               STRING
OffsetSync     topic STRING, partition INT32                       upstreamOffset INT64, offset INT64
                                                                   (no version field: MM2 has none)
OffsetSegment  version INT16 (0), topic STRING, partition INT32,   version INT16 (0), upstream_start INT64,
(sparkmirror)  upstream_start INT64                                downstream_start INT64, count INT64,
                                                                   written_at_ms INT64
OffsetChain    version INT16 (1), topic STRING, partition INT32,   version INT16 (0), upstream_start INT64,
(sparkmirror)  chain_start INT64                                   downstream_start INT64, gap INT64,
                                                                   written_at_ms INT64, width INT16 (4 or 8),
                                                                   batches INT32, then ``batches`` ends of
                                                                   ``width`` bytes each, LITTLE endian
=============  ==================================================  ===========================================

**OffsetSegment** is sparkmirror's record of the exact offset map (see
:mod:`sparkmirror.core.offsetmap`): ``count`` consecutive upstream records starting at
``upstream_start`` of ``topic[partition]`` on the source were written at consecutive
downstream offsets starting at ``downstream_start``. The key holds the upstream start, so in
the compacted offset-map topic a replay that starts at the same upstream offset replaces the
earlier segment, and a tombstone for that key removes a pruned one. The key carries its own
version (first, so a future key layout can be told apart before anything else is parsed).
``written_at_ms`` is the writer's wall clock, for operators and for age-based reports.

**OffsetChain** folds consecutive segments of one partition that each start upstream where the
one before ended and downstream ``gap`` past its end (exactly-once: every transaction's commit
marker takes one downstream offset, so ``gap`` is 1). Batch i of the chain covers upstream
``[upstream_start + end[i-1], upstream_start + end[i])`` (``end[-1]`` = 0) at downstream
``downstream_start + end[i-1] + i * gap`` on. The ends are cumulative, so a loaded chain is
bisected as it lies, without a pass over its batches, and they are little endian, so that
``array.frombytes`` reads them at memory speed on the hosts sparkmirror runs on (a big-endian
host swaps them). The key's version 1 tells a chain from a segment (key version 0) before
anything else is read; ``chain_start`` is the upstream start the chain had when it was first
written, and stays its key when pruning drops its first batches (then ``upstream_start`` in the
value is higher): a chain is rewritten in place, never moved to another key.

Decoding is strict: truncated input, trailing bytes, an unknown version and fields that
contradict each other raise :class:`FormatError` naming the record type, the part (key or
value) and the field. This module must never import pyspark or a Kafka client.
"""

from __future__ import annotations

import struct
import sys
from array import array
from dataclasses import dataclass
from typing import Any, ClassVar

from sparkmirror.core.exceptions import FormatError

__all__ = [
    "INT16",
    "INT32",
    "INT64",
    "STRING",
    "Checkpoint",
    "Field",
    "Heartbeat",
    "OffsetChain",
    "OffsetSegment",
    "OffsetSync",
    "decode_offset_map_key",
    "Schema",
]

#: Kafka protocol primitive type names, as used in the schemas below.
INT16 = "INT16"
INT32 = "INT32"
INT64 = "INT64"
STRING = "STRING"

_FIXED = {INT16: struct.Struct(">h"), INT32: struct.Struct(">i"), INT64: struct.Struct(">q")}
_STRING_LEN = _FIXED[INT16]
_MAX_STRING_BYTES = 0x7FFF
#: Offset-map records in their version-0 layouts, read and written in one call each: a run loads every
#: segment of the map at start (one per partition per exactly-once transaction), and the generic
#: field-by-field reader made that load take minutes at 1,000 partitions.
_SEGMENT_KEY_TAIL_V0 = struct.Struct(">iq")
#: A version-0 key's version and topic length, before the topic's bytes.
_SEGMENT_KEY_HEAD_V0 = struct.Struct(">hh")
_SEGMENT_VALUE_V0 = struct.Struct(">hqqqq")
#: OffsetChain value version 0: everything before the packed ends.
_CHAIN_HEADER_V0 = struct.Struct(">hqqqqhi")
_CHAIN_TYPECODES = {4: "i", 8: "q"}
_INT64_MAX = 2**63 - 1
#: The offset-map key versions: what kind of record a key names.
SEGMENT_KEY_VERSION = 0
CHAIN_KEY_VERSION = 1


@dataclass(frozen=True)
class Field:
    """One named field of a schema and its Kafka protocol type."""

    name: str
    type: str


@dataclass(frozen=True)
class Schema:
    """An ordered list of fields; writes and reads them back to back, nothing between."""

    fields: tuple[Field, ...]

    def write(self, values: tuple[int | str, ...], *, what: str) -> bytes:
        """Encode ``values`` (one per field, in order). ``what`` names the record part in errors."""
        if len(values) != len(self.fields):
            raise FormatError(f"{what}: expected {len(self.fields)} fields, got {len(values)}")
        out = bytearray()
        for field, value in zip(self.fields, values, strict=True):
            if field.type == STRING:
                if not isinstance(value, str):
                    raise FormatError(f"{what}: field {field.name} must be a string, got {type(value).__name__}")
                raw = value.encode("utf-8")
                if len(raw) > _MAX_STRING_BYTES:
                    raise FormatError(
                        f"{what}: field {field.name} is {len(raw)} bytes of UTF-8; "
                        f"the Kafka protocol's STRING holds at most {_MAX_STRING_BYTES}"
                    )
                out += _STRING_LEN.pack(len(raw))
                out += raw
            else:
                if not isinstance(value, int) or isinstance(value, bool):
                    raise FormatError(f"{what}: field {field.name} must be an int, got {type(value).__name__}")
                try:
                    out += _FIXED[field.type].pack(value)
                except struct.error:
                    raise FormatError(f"{what}: field {field.name}={value} does not fit in {field.type}") from None
        return bytes(out)

    def read(self, data: bytes, *, what: str, offset: int = 0) -> tuple[tuple[int | str, ...], int]:
        """Decode the fields from ``data`` starting at ``offset``; returns the values and the end position."""
        values: list[int | str] = []
        pos = offset
        for field in self.fields:
            if field.type == STRING:
                length = self._fixed(_STRING_LEN, data, pos, what, f"{field.name} (STRING length)")
                pos += _STRING_LEN.size
                if length < 0:
                    raise FormatError(f"{what}: field {field.name} has length {length}; null strings are not allowed")
                if pos + length > len(data):
                    raise FormatError(
                        f"{what}: truncated in field {field.name}: needs {length} bytes at byte {pos}, "
                        f"only {len(data) - pos} left"
                    )
                try:
                    values.append(data[pos : pos + length].decode("utf-8"))
                except UnicodeDecodeError as err:
                    raise FormatError(f"{what}: field {field.name} is not valid UTF-8 ({err.reason})") from None
                pos += length
            else:
                codec = _FIXED[field.type]
                values.append(self._fixed(codec, data, pos, what, field.name))
                pos += codec.size
        return tuple(values), pos

    def read_exactly(self, data: bytes, *, what: str, offset: int = 0) -> tuple[int | str, ...]:
        """Like :meth:`read`, and the fields must use every remaining byte."""
        values, end = self.read(data, what=what, offset=offset)
        if end != len(data):
            raise FormatError(f"{what}: {len(data) - end} unexpected trailing bytes after byte {end}")
        return values

    @staticmethod
    def _fixed(codec: struct.Struct, data: bytes, pos: int, what: str, name: str) -> int:
        if pos + codec.size > len(data):
            raise FormatError(
                f"{what}: truncated in field {name}: needs {codec.size} bytes at byte {pos}, "
                f"only {max(len(data) - pos, 0)} left"
            )
        value: int = codec.unpack_from(data, pos)[0]
        return value


def _schema(*fields: tuple[str, str]) -> Schema:
    return Schema(tuple(Field(name, type_) for name, type_ in fields))


_VERSION_HEADER = _schema(("version", INT16))


def _bytes(data: bytes | bytearray | memoryview | None, what: str) -> bytes:
    if data is None:
        raise FormatError(f"{what} is null (a tombstone?); nothing to decode")
    return bytes(data)


def _read_versioned(data: bytes, schemas: dict[int, Schema], *, what: str) -> tuple[int, tuple[int | str, ...]]:
    (version,), pos = _VERSION_HEADER.read(data, what=what)
    assert isinstance(version, int)
    schema = schemas.get(version)
    if schema is None:
        known = ", ".join(str(v) for v in sorted(schemas))
        raise FormatError(f"{what}: unknown version {version} (this build reads version {known})")
    return version, schema.read_exactly(data, what=what, offset=pos)


def _s(value: int | str) -> str:
    assert isinstance(value, str)
    return value


def _i(value: int | str) -> int:
    assert isinstance(value, int)
    return value


@dataclass(frozen=True)
class Checkpoint:
    """MM2's checkpoint: where a source consumer group is, upstream and translated downstream.

    ``topic`` is the topic as the checkpoint names it (MM2 writes the remote topic name,
    e.g. ``A.orders``). Written to ``<source>.checkpoints.internal`` on the target.
    """

    VERSION: ClassVar[int] = 0
    KEY_SCHEMA: ClassVar[Schema] = _schema(("group", STRING), ("topic", STRING), ("partition", INT32))
    VALUE_SCHEMA_V0: ClassVar[Schema] = _schema(("upstreamOffset", INT64), ("offset", INT64), ("metadata", STRING))

    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def key_bytes(self) -> bytes:
        """The record key: group, topic, partition."""
        return self.KEY_SCHEMA.write((self.group, self.topic, self.partition), what="Checkpoint key")

    def value_bytes(self) -> bytes:
        """The record value: version 0, upstream offset, downstream offset, metadata."""
        return _VERSION_HEADER.write((self.VERSION,), what="Checkpoint value") + self.VALUE_SCHEMA_V0.write(
            (self.upstream_offset, self.downstream_offset, self.metadata), what="Checkpoint value"
        )

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> Checkpoint:
        """Read a checkpoint record back; raises :class:`FormatError` if the bytes are not one."""
        group, topic, partition = cls.KEY_SCHEMA.read_exactly(_bytes(key, "Checkpoint key"), what="Checkpoint key")
        _, (upstream, downstream, metadata) = _read_versioned(
            _bytes(value, "Checkpoint value"), {0: cls.VALUE_SCHEMA_V0}, what="Checkpoint value"
        )
        return cls(_s(group), _s(topic), _i(partition), _i(upstream), _i(downstream), _s(metadata))


@dataclass(frozen=True)
class Heartbeat:
    """MM2's heartbeat: emitted on the source as ``heartbeats``, replicated like data."""

    VERSION: ClassVar[int] = 0
    KEY_SCHEMA: ClassVar[Schema] = _schema(("sourceClusterAlias", STRING), ("targetClusterAlias", STRING))
    VALUE_SCHEMA_V0: ClassVar[Schema] = _schema(("timestamp", INT64))

    source_cluster_alias: str
    target_cluster_alias: str
    timestamp: int

    def key_bytes(self) -> bytes:
        """The record key: source alias, target alias."""
        return self.KEY_SCHEMA.write((self.source_cluster_alias, self.target_cluster_alias), what="Heartbeat key")

    def value_bytes(self) -> bytes:
        """The record value: version 0, timestamp (ms)."""
        return _VERSION_HEADER.write((self.VERSION,), what="Heartbeat value") + self.VALUE_SCHEMA_V0.write(
            (self.timestamp,), what="Heartbeat value"
        )

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> Heartbeat:
        """Read a heartbeat record back; raises :class:`FormatError` if the bytes are not one."""
        source, target = cls.KEY_SCHEMA.read_exactly(_bytes(key, "Heartbeat key"), what="Heartbeat key")
        _, (timestamp,) = _read_versioned(
            _bytes(value, "Heartbeat value"), {0: cls.VALUE_SCHEMA_V0}, what="Heartbeat value"
        )
        return cls(_s(source), _s(target), _i(timestamp))


@dataclass(frozen=True)
class OffsetSync:
    """MM2's offset sync: one (upstream, downstream) pair of a source partition.

    Its value has no version field in MM2 (unlike Checkpoint and Heartbeat); so neither
    has it here. Written to ``mm2-offset-syncs.<alias>.internal``.
    """

    KEY_SCHEMA: ClassVar[Schema] = _schema(("topic", STRING), ("partition", INT32))
    VALUE_SCHEMA: ClassVar[Schema] = _schema(("upstreamOffset", INT64), ("offset", INT64))

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def key_bytes(self) -> bytes:
        """The record key: topic, partition (the source topic)."""
        return self.KEY_SCHEMA.write((self.topic, self.partition), what="OffsetSync key")

    def value_bytes(self) -> bytes:
        """The record value: upstream offset, downstream offset."""
        return self.VALUE_SCHEMA.write((self.upstream_offset, self.downstream_offset), what="OffsetSync value")

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> OffsetSync:
        """Read an offset-sync record back; raises :class:`FormatError` if the bytes are not one."""
        topic, partition = cls.KEY_SCHEMA.read_exactly(_bytes(key, "OffsetSync key"), what="OffsetSync key")
        upstream, downstream = cls.VALUE_SCHEMA.read_exactly(_bytes(value, "OffsetSync value"), what="OffsetSync value")
        return cls(_s(topic), _i(partition), _i(upstream), _i(downstream))


@dataclass(frozen=True)
class OffsetSegment:
    """sparkmirror's offset-map record: ``count`` records of ``topic[partition]`` from
    ``upstream_start`` were written downstream from ``downstream_start`` (layout in the module doc)."""

    KEY_VERSION: ClassVar[int] = 0
    VERSION: ClassVar[int] = 0
    KEY_SCHEMA_V0: ClassVar[Schema] = _schema(("topic", STRING), ("partition", INT32), ("upstream_start", INT64))
    VALUE_SCHEMA_V0: ClassVar[Schema] = _schema(
        ("upstream_start", INT64), ("downstream_start", INT64), ("count", INT64), ("written_at_ms", INT64)
    )

    topic: str
    partition: int
    upstream_start: int
    downstream_start: int
    count: int
    written_at_ms: int

    @classmethod
    def encode_key(cls, topic: str, partition: int, upstream_start: int) -> bytes:
        """The key of the segment of ``topic[partition]`` starting at ``upstream_start``
        (also the key of the tombstone that deletes it)."""
        # A task writes one per partition every commit interval: one pack, as the reads below; anything
        # the pack cannot take goes through the generic writer, which says what is wrong.
        if type(topic) is str and type(partition) is int and type(upstream_start) is int:
            raw = topic.encode("utf-8")
            if len(raw) <= _MAX_STRING_BYTES:
                try:
                    return (
                        _SEGMENT_KEY_HEAD_V0.pack(cls.KEY_VERSION, len(raw))
                        + raw
                        + _SEGMENT_KEY_TAIL_V0.pack(partition, upstream_start)
                    )
                except struct.error:
                    pass
        return _VERSION_HEADER.write((cls.KEY_VERSION,), what="OffsetSegment key") + cls.KEY_SCHEMA_V0.write(
            (topic, partition, upstream_start), what="OffsetSegment key"
        )

    @classmethod
    def decode_key(cls, key: bytes | None) -> tuple[str, int, int]:
        """``(topic, partition, upstream_start)`` from a key; tombstones have only a key."""
        if type(key) is bytes and len(key) >= 4 and key[0] == 0 and key[1] == 0:
            # Version 0, whole and nothing after it: one unpack. Anything else takes the generic
            # reader, which also says what is wrong.
            n = (key[2] << 8) | key[3]
            if n < 0x8000 and len(key) == 4 + n + _SEGMENT_KEY_TAIL_V0.size:
                try:
                    topic_str = key[4 : 4 + n].decode("utf-8")
                except UnicodeDecodeError:
                    pass
                else:
                    partition_int, start = _SEGMENT_KEY_TAIL_V0.unpack_from(key, 4 + n)
                    return topic_str, partition_int, start
        _, (topic, partition, upstream_start) = _read_versioned(
            _bytes(key, "OffsetSegment key"), {0: cls.KEY_SCHEMA_V0}, what="OffsetSegment key"
        )
        return _s(topic), _i(partition), _i(upstream_start)

    def key_bytes(self) -> bytes:
        """The record key: key version 0, topic, partition, upstream start."""
        return self.encode_key(self.topic, self.partition, self.upstream_start)

    def value_bytes(self) -> bytes:
        """The record value: version 0, upstream start, downstream start, count, written at (ms)."""
        if self.count < 1:
            raise FormatError(f"OffsetSegment value: count must be >= 1, got {self.count}")
        values = (self.upstream_start, self.downstream_start, self.count, self.written_at_ms)
        if all(type(v) is int for v in values):
            try:
                return _SEGMENT_VALUE_V0.pack(self.VERSION, *values)
            except struct.error:
                pass
        return _VERSION_HEADER.write((self.VERSION,), what="OffsetSegment value") + self.VALUE_SCHEMA_V0.write(
            (self.upstream_start, self.downstream_start, self.count, self.written_at_ms),
            what="OffsetSegment value",
        )

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> OffsetSegment:
        """Read a segment record back; raises :class:`FormatError` on bad bytes, on a key
        whose upstream start differs from the value's, or on a count below 1."""
        topic, partition, key_start = cls.decode_key(key)
        if type(value) is bytes and len(value) == _SEGMENT_VALUE_V0.size and value[0] == 0 and value[1] == 0:
            _, upstream_start, downstream_start, count, written_at_ms = _SEGMENT_VALUE_V0.unpack(value)
        else:
            _, (upstream_start, downstream_start, count, written_at_ms) = _read_versioned(
                _bytes(value, "OffsetSegment value"), {0: cls.VALUE_SCHEMA_V0}, what="OffsetSegment value"
            )
        if upstream_start != key_start:
            raise FormatError(
                f"OffsetSegment {topic}[{partition}]: key says upstream_start={key_start}, value says {upstream_start}"
            )
        if _i(count) < 1:
            raise FormatError(f"OffsetSegment {topic}[{partition}] upstream_start={key_start}: count={count} < 1")
        return cls(topic, partition, key_start, _i(downstream_start), _i(count), _i(written_at_ms))


def json_record(kind: str, key: bytes, value: bytes, version: int) -> dict[str, Any]:
    """The JSON object of one of sparkmirror's own JSON records (status, flow control): UTF-8, an
    object, ``version`` as expected; else :class:`FormatError` naming the record type and its key."""
    import json

    try:
        data = json.loads(value.decode())
    except (UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"{kind} value of {key!r}: not UTF-8 JSON ({exc})") from None
    if not isinstance(data, dict):
        raise FormatError(f"{kind} value of {key!r}: not a JSON object")
    if data.get("version") != version:
        raise FormatError(f"{kind} value of {key!r}: unknown version {data.get('version')!r}")
    return data


def decode_offset_map_key(key: bytes | None) -> tuple[int, str, int, int]:
    """``(key version, topic, partition, upstream start)`` of any offset-map record's key
    (tombstones included): version 0 names a segment, version 1 a chain."""
    raw = _bytes(key, "offset map key")
    if len(raw) >= 2 and raw[0] == 0 and raw[1] == CHAIN_KEY_VERSION:
        return (CHAIN_KEY_VERSION, *OffsetChain.decode_key(raw))
    if len(raw) >= 2 and raw[0] == 0 and raw[1] == SEGMENT_KEY_VERSION:
        return (SEGMENT_KEY_VERSION, *OffsetSegment.decode_key(raw))
    (version,), _ = _VERSION_HEADER.read(raw, what="offset map key")
    raise FormatError(
        f"offset map key: unknown version {version} (this build reads versions "
        f"{SEGMENT_KEY_VERSION} (segment) and {CHAIN_KEY_VERSION} (chain))"
    )


@dataclass(frozen=True, eq=False)
class OffsetChain:
    """sparkmirror's offset-map record of a chain of segments (layout in the module doc).

    ``ends`` holds the cumulative upstream end of each batch, relative to ``upstream_start``
    (an ``array('i')`` or ``array('q')``). Decoding checks the header and the size; that the ends
    rise is checked where a chain is used (:meth:`sparkmirror.core.offsetmap.Chain.check`): a
    pass over every batch of a day's map at load costs seconds.
    """

    KEY_VERSION: ClassVar[int] = CHAIN_KEY_VERSION
    VERSION: ClassVar[int] = 0
    KEY_SCHEMA_V1: ClassVar[Schema] = _schema(("topic", STRING), ("partition", INT32), ("chain_start", INT64))

    topic: str
    partition: int
    chain_start: int
    upstream_start: int
    downstream_start: int
    gap: int
    ends: array
    written_at_ms: int

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OffsetChain):
            return NotImplemented
        return (
            self.topic,
            self.partition,
            self.chain_start,
            self.upstream_start,
            self.downstream_start,
            self.gap,
            self.written_at_ms,
        ) == (
            other.topic,
            other.partition,
            other.chain_start,
            other.upstream_start,
            other.downstream_start,
            other.gap,
            other.written_at_ms,
        ) and list(self.ends) == list(other.ends)

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def encode_key(cls, topic: str, partition: int, chain_start: int) -> bytes:
        """The key of the chain of ``topic[partition]`` first written at ``chain_start``
        (also the key of the tombstone that deletes it)."""
        return _VERSION_HEADER.write((cls.KEY_VERSION,), what="OffsetChain key") + cls.KEY_SCHEMA_V1.write(
            (topic, partition, chain_start), what="OffsetChain key"
        )

    @classmethod
    def decode_key(cls, key: bytes | None) -> tuple[str, int, int]:
        """``(topic, partition, chain_start)`` from a chain key."""
        _, (topic, partition, chain_start) = _read_versioned(
            _bytes(key, "OffsetChain key"), {cls.KEY_VERSION: cls.KEY_SCHEMA_V1}, what="OffsetChain key"
        )
        return _s(topic), _i(partition), _i(chain_start)

    def key_bytes(self) -> bytes:
        """The record key: key version 1, topic, partition, chain start."""
        return self.encode_key(self.topic, self.partition, self.chain_start)

    def value_bytes(self) -> bytes:
        """The record value: version 0, the header, then the ends packed little endian."""
        what = f"OffsetChain {self.topic}[{self.partition}] chain_start={self.chain_start}"
        n = len(self.ends)
        if n < 1:
            raise FormatError(f"{what}: a chain holds at least one batch")
        if self.gap < 0 or self.upstream_start < self.chain_start:
            raise FormatError(f"{what}: gap={self.gap} < 0 or upstream_start={self.upstream_start} below its key")
        width = 4 if self.ends.itemsize == 4 or max(self.ends) < 2**31 else 8
        packed = self.ends if self.ends.itemsize == width else array(_CHAIN_TYPECODES[width], self.ends)
        if sys.byteorder == "big":
            packed = array(packed.typecode, packed)
            packed.byteswap()
        try:
            header = _CHAIN_HEADER_V0.pack(
                self.VERSION, self.upstream_start, self.downstream_start, self.gap, self.written_at_ms, width, n
            )
        except struct.error:
            raise FormatError(f"{what}: a field does not fit in its type") from None
        return header + packed.tobytes()

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> OffsetChain:
        """Read a chain record back; raises :class:`FormatError` naming the chain on bad bytes."""
        topic, partition, chain_start = cls.decode_key(key)
        what = f"OffsetChain {topic}[{partition}] chain_start={chain_start}"
        raw = _bytes(value, f"{what} value")
        if len(raw) < _CHAIN_HEADER_V0.size:
            if len(raw) >= 2 and int.from_bytes(raw[:2], "big", signed=True) != cls.VERSION:
                version = int.from_bytes(raw[:2], "big", signed=True)
                raise FormatError(f"{what} value: unknown version {version} (this build reads version {cls.VERSION})")
            raise FormatError(f"{what} value: truncated: {len(raw)} bytes, the header alone is {_CHAIN_HEADER_V0.size}")
        version, upstream_start, downstream_start, gap, written_at_ms, width, n = _CHAIN_HEADER_V0.unpack_from(raw)
        if version != cls.VERSION:
            raise FormatError(f"{what} value: unknown version {version} (this build reads version {cls.VERSION})")
        typecode = _CHAIN_TYPECODES.get(width)
        if typecode is None:
            raise FormatError(f"{what} value: width {width} is neither 4 nor 8 bytes")
        if n < 1:
            raise FormatError(f"{what} value: {n} batches; a chain holds at least one")
        if len(raw) != _CHAIN_HEADER_V0.size + n * width:
            raise FormatError(
                f"{what} value: {len(raw)} bytes where a header and {n} ends of {width} bytes take "
                f"{_CHAIN_HEADER_V0.size + n * width}"
            )
        ends = array(typecode)
        ends.frombytes(memoryview(raw)[_CHAIN_HEADER_V0.size :])
        if sys.byteorder == "big":
            ends.byteswap()
        if gap < 0 or upstream_start < chain_start or downstream_start < 0 or ends[0] < 1:
            raise FormatError(
                f"{what} value: gap={gap}, upstream_start={upstream_start}, downstream_start={downstream_start}, "
                f"first end={ends[0]}: a gap >= 0, an upstream start at or above the key's and a first batch "
                "of at least one record are required"
            )
        if upstream_start + ends[-1] > _INT64_MAX or downstream_start + ends[-1] + (n - 1) * gap > _INT64_MAX:
            raise FormatError(f"{what} value: its last batch ends past the largest offset")
        return cls(topic, partition, chain_start, upstream_start, downstream_start, gap, ends, written_at_ms)
