"""The transport's frames: ``frames.FRAMES`` names the kinds the Java side reads and writes, and the
Python codecs read what they are meant to (tests/integration/test_transport.py runs both sides)."""

from __future__ import annotations

import re
import struct
from pathlib import Path

from sparkmirror.pipeline.transport import frames

JAVA = Path(frames.__file__).parent / "java" / "TransportServer.java"


def _java_kinds() -> tuple[set[str], set[str]]:
    """The kinds (and request ops) the Java source reads (``case 'X'``, ``f.kind == 'X'``) and writes (``write('X'``,
    ``frames.error``: 'X')."""
    text = JAVA.read_text()
    read = set(re.findall(r"case '(.)'", text)) | set(re.findall(r"(?:kind|f\.kind) (?:==|!=) '(.)'", text))
    written = set(re.findall(r"write\('(.)'", text)) | {"X"}  # frames.error writes 'X'
    return read, written


def test_both_sides_name_the_same_frame_kinds_and_requests() -> None:
    read, written = _java_kinds()
    to_java = {k for (k, _role, direction) in frames.FRAMES if direction == "to java"}
    to_python = {k for (k, _role, direction) in frames.FRAMES if direction == "to python"}
    assert read == to_java | set(frames.REQUESTS)  # a request's op is a case of the producer's switch
    assert written == to_python


def test_a_records_frame_reads_back_every_field_partition_by_partition() -> None:
    body = bytearray(frames.INT.pack(7) + frames.INT.pack(2))
    body += frames.INT.pack(3) + frames.INT.pack(2)  # partition 3: two records
    body += struct.pack(">qqi", 41, 1_700_000_000_000, 2) + b"k1"
    body += frames.INT.pack(-1)  # a null value
    body += frames.INT.pack(2)
    frames.put_str(body, "h")
    frames.put_bytes(body, b"v")
    frames.put_str(body, "empty")
    frames.put_bytes(body, None)
    body += struct.pack(">qqi", 42, -1, 0) + frames.INT.pack(1) + b"x" + frames.INT.pack(0)  # an empty key
    body += frames.INT.pack(4) + frames.INT.pack(1)  # partition 4: one record
    body += struct.pack(">qqi", 7, 5, -1) + frames.INT.pack(0) + frames.INT.pack(0)  # null key, empty value
    body += frames.INT.pack(1) + struct.pack(">iqq", 3, 43, 50)
    body += frames.INT.pack(1) + struct.pack(">iq", 4, 8)
    moves, runs, positions, ends = frames.records(bytes(body))
    assert moves == 7
    assert runs == [
        (3, [(41, b"k1", None, 1_700_000_000_000, [("h", b"v"), ("empty", None)]), (42, b"", b"x", -1, None)]),
        (4, [(7, None, b"", 5, None)]),
    ]
    assert positions == [(3, 43, 50)]
    assert ends == [(4, 8)]


def test_acknowledgement_runs_carry_the_error_text_only_when_there_is_one() -> None:
    body = bytearray(frames.INT.pack(2))
    body += struct.pack(">iqiqi", 1, 0, 5, 100, 0)
    body += struct.pack(">iqiqi", 2, 7, 1, -1, 32)
    frames.put_str(body, "InvalidTimestampException: too old")
    assert frames.acks(bytes(body)) == [
        (1, 0, 5, 100, 0, ""),
        (2, 7, 1, -1, 32, "InvalidTimestampException: too old"),
    ]


def test_a_record_to_write_is_encoded_as_the_java_side_reads_it() -> None:
    out = bytearray()
    frames.put_record(out, 9, 123, None, b"value", [("h", None)])
    assert out == (
        struct.pack(">iqi", 9, 123, -1) + frames.INT.pack(5) + b"value" + frames.INT.pack(1)
        + frames.INT.pack(1) + b"h" + frames.INT.pack(-1)
    )  # fmt: skip
