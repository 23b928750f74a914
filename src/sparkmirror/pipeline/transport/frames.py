"""The transport's frames: the one list of what a task's Python and the transport JVM say to each other.

A frame is a kind byte, the body's length (a big-endian int) and the body. In a body every number is
big-endian; ``bytes`` is an int length (-1: null) and that many bytes; ``str`` is ``bytes`` of UTF-8;
``n x {...}`` is an int count and that many groups. ``java/TransportServer.java`` writes and reads the
same kinds (``tests/unit/pipeline/test_transport_frames.py`` checks that both name the same ones), and
the codecs here are the only Python that encodes or decodes them.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

HEAD = struct.Struct(">Bi")
INT = struct.Struct(">i")
LONG = struct.Struct(">q")


#: Every frame, by (kind, role, direction).
FRAMES: dict[tuple[str, str, str], str] = {
    ("C", "any", "to java"): "nonce:bytes  (the first frame: a challenge)",
    ("C", "any", "to python"): "proof:bytes  (HMAC-SHA256 of the nonce under the token of the port file)",
    ("H", "any", "to java"): "token:bytes role:byte n x {key:str value:str}  (the client's Java settings)",
    ("H", "any", "to python"): "(empty) the client is made",
    ("X", "any", "to python"): "id:int code:int flags:byte name:str message:str  (id -1: the client's own; as 'Q')",
    ("T", "consumer", "to java"): "n x {id:int topic:str partition:int}  (names a partition by id)",
    ("A", "consumer", "to java"): "n x {id:int offset:long}  (assign these, at these offsets, in place of any before)",
    ("K", "consumer", "to java"): "n x {id:int offset:long}  (seek)",
    ("U", "consumer", "to java"): "n x {id:int}  (unassign)",
    ("S", "consumer", "to java"): "n x {id:int}  (pause)",
    ("G", "consumer", "to java"): "n x {id:int}  (resume)",
    ("N", "consumer", "to java"): "credits:int  (may send that many more 'R' frames with records)",
    ("R", "consumer", "to python"): (
        "moves:int  (the assign and seek frames run so far) "
        "n x {id:int m x {offset:long timestamp:long key:bytes value:bytes h x {key:str value:bytes}}} "
        "n x {id:int position:long end:long} n x {id:int offset:long}  "
        "(each partition's records, in offset order; positions; ends reached)"
    ),
    ("T", "producer", "to java"): "n x {id:int topic:str partition:int}",
    ("P", "producer", "to java"): (
        "n x {id:int timestamp:long key:bytes value:bytes m x {key:str value:bytes}}  "
        "(records; each partition's numbered from 0 in order)"
    ),
    ("Q", "producer", "to java"): (
        "number:int op:byte [offsets: n x {topic:str partition:int offset:long} if op 'O'] [topic:str if op 'M']  "
        "(a request: 'I' init, 'B' begin, 'O' send offsets, 'C' commit, 'Z' abort a transaction, 'M' metadata)"
    ),
    ("Q", "producer", "to python"): (
        "number:int code:int flags:byte name:str message:str [payload if code == 0]  (flags: 1 fatal, 2 "
        "retriable, 4 the transaction must be aborted; 'M': n x {partition:int leader:int m x {isr:int}} "
        "n x {broker:int host:str port:int}), after every acknowledgement queued before it"
    ),
    ("A", "producer", "to python"): (
        "n x {id:int first:long count:int offset:long code:int [message:str if code != 0]}  "
        "(a run of acknowledgements: numbers first.., target offsets offset..)"
    ),
}

#: The producer's requests ('Q' frames), by their op byte.
REQUESTS = {
    "I": "init_transactions",
    "B": "begin_transaction",
    "O": "send_offsets_to_transaction",
    "C": "commit_transaction",
    "Z": "abort_transaction",
    "M": "metadata of one topic",
}

#: The transport's own error code (a refused connection, an unknown frame): librdkafka's ``_TRANSPORT``.
ERR_TRANSPORT = -195


def frame(kind: str, body: bytes | bytearray) -> bytes:
    return HEAD.pack(ord(kind), len(body)) + body


def put_bytes(out: bytearray, b: bytes | None) -> None:
    if b is None:
        out += b"\xff\xff\xff\xff"
    else:
        out += INT.pack(len(b))
        out += b


def put_str(out: bytearray, s: str) -> None:
    put_bytes(out, s.encode())


def take_bytes(body: bytes, pos: int) -> tuple[bytes | None, int]:
    n = INT.unpack_from(body, pos)[0]
    pos += 4
    if n < 0:
        return None, pos
    return body[pos : pos + n], pos + n


def take_str(body: bytes, pos: int) -> tuple[str, int]:
    b, pos = take_bytes(body, pos)
    return (b or b"").decode(), pos


def challenge(nonce: bytes) -> bytes:
    out = bytearray()
    put_bytes(out, nonce)
    return frame("C", out)


def proof(token: bytes, nonce: bytes) -> bytes:
    """What the JVM that wrote the port file answers to ``nonce``."""
    import hashlib
    import hmac

    return hmac.new(token, nonce, hashlib.sha256).digest()


def hello(token: bytes, role: str, settings: dict[str, str]) -> bytes:
    out = bytearray()
    put_bytes(out, token)
    out += role.encode()
    out += INT.pack(len(settings))
    for k, v in settings.items():
        put_str(out, k)
        put_str(out, v)
    return frame("H", out)


def define(pairs: list[tuple[int, str, int]]) -> bytes:
    out = bytearray(INT.pack(len(pairs)))
    for pid, topic, partition in pairs:
        out += INT.pack(pid)
        put_str(out, topic)
        out += INT.pack(partition)
    return frame("T", out)


_ID_OFFSET = struct.Struct(">iq")


def offsets(kind: str, items: list[tuple[int, int]]) -> bytes:
    out = bytearray(INT.pack(len(items)))
    for pid, offset in items:
        out += _ID_OFFSET.pack(pid, offset)
    return frame(kind, out)


def ids(kind: str, items: list[int]) -> bytes:
    return frame(kind, INT.pack(len(items)) + b"".join(INT.pack(i) for i in items))


def credits(n: int) -> bytes:
    return frame("N", INT.pack(n))


_RECORD_HEAD = struct.Struct(">qqi")
_RUN_HEAD = struct.Struct(">ii")
_POSITION = struct.Struct(">iqq")

#: A record read: (offset, key, value, timestamp in ms or -1 for none, headers or None), as the sink
#: takes it (:data:`~sparkmirror.pipeline.executor.sink.Record`).
Read = tuple[int, bytes | None, bytes | None, int, list[tuple[str, bytes | None]] | None]


def records(
    body: bytes,
) -> tuple[int, list[tuple[int, list[Read]]], list[tuple[int, int, int]], list[tuple[int, int]]]:
    """An 'R' frame: the assign and seek frames the JVM had run when it sent it, each partition's records
    (id, records in offset order), the positions and ends it says (id, position, end), and the ends
    reached (id, offset). The hot path of a task reading through the transport: a partition's records
    come together, so nothing is grouped again, and each is a tuple, not an object."""
    unpack_head = _RECORD_HEAD.unpack_from
    unpack_int = INT.unpack_from
    runs: list[tuple[int, list[Read]]] = []
    moves, n = _RUN_HEAD.unpack_from(body, 0)
    pos = 8
    for _ in range(n):
        pid, count = _RUN_HEAD.unpack_from(body, pos)
        pos += 8
        run: list[Read] = []
        append = run.append
        for _r in range(count):
            offset, ts, klen = unpack_head(body, pos)
            pos += 20
            # The key and the value are take_bytes inlined: a call a field would cost more than the rest.
            if klen < 0:
                key = None
            else:
                key = body[pos : pos + klen]
                pos += klen
            vlen = unpack_int(body, pos)[0]
            pos += 4
            if vlen < 0:
                value = None
            else:
                value = body[pos : pos + vlen]
                pos += vlen
            hcount = unpack_int(body, pos)[0]
            pos += 4
            headers: list[tuple[str, bytes | None]] | None = None
            if hcount:
                headers = []
                for _h in range(hcount):
                    hk, pos = take_str(body, pos)
                    hv, pos = take_bytes(body, pos)
                    headers.append((hk, hv))
            append((offset, key, value, ts, headers))
        runs.append((pid, run))
    positions: list[tuple[int, int, int]] = []
    for _ in range(unpack_int(body, pos)[0]):
        positions.append(_POSITION.unpack_from(body, pos + 4 + len(positions) * 20))
    pos += 4 + 20 * len(positions)
    ends = [_ID_OFFSET.unpack_from(body, pos + 4 + 12 * i) for i in range(unpack_int(body, pos)[0])]
    return moves, runs, positions, ends


_SEND_HEAD = struct.Struct(">iqi")


def put_record(
    out: bytearray,
    pid: int,
    timestamp: int,
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[str, bytes | None]] | None,
) -> None:
    """One record of a 'P' frame."""
    if key is None:
        out += _SEND_HEAD.pack(pid, timestamp, -1)
    else:
        out += _SEND_HEAD.pack(pid, timestamp, len(key))
        out += key
    put_bytes(out, value)
    if headers:
        out += INT.pack(len(headers))
        for hk, hv in headers:
            put_str(out, hk)
            put_bytes(out, hv)
    else:
        out += b"\0\0\0\0"


def request(number: int, op: str, payload: bytes = b"") -> bytes:
    assert op in REQUESTS, op
    return frame("Q", INT.pack(number) + op.encode() + payload)


def offsets_payload(positions: list[tuple[str, int, int]]) -> bytes:
    out = bytearray(INT.pack(len(positions)))
    for topic, partition, offset in positions:
        put_str(out, topic)
        out += _ID_OFFSET.pack(partition, offset)
    return bytes(out)


def str_payload(text: str) -> bytes:
    out = bytearray()
    put_str(out, text)
    return bytes(out)


class Reply(NamedTuple):
    """A 'Q' answer, or an 'X' error (``number``: the partition's id, -1 the client's own; ``flags``:
    1 fatal, 2 retriable, 4 the transaction must be aborted; an error's ``code`` is not 0)."""

    number: int
    code: int
    flags: int
    name: str
    message: str
    payload: bytes


def reply(body: bytes) -> Reply:
    """A 'Q' or 'X' frame's body: both start with a number, an error code, its flags, name and text."""
    number, code, flags = struct.unpack_from(">iib", body, 0)
    name, pos = take_str(body, 9)
    message, pos = take_str(body, pos)
    return Reply(number, code, flags, name, message, body[pos:])


#: A topic's metadata: {partition: (leader, in-sync replicas)}, {broker: (host, port)}.
Metadata = tuple[dict[int, tuple[int, list[int]]], dict[int, tuple[str, int]]]


def metadata(payload: bytes) -> Metadata:
    pos = 4
    partitions: dict[int, tuple[int, list[int]]] = {}
    for _ in range(INT.unpack_from(payload, 0)[0]):
        partition, leader, n = struct.unpack_from(">iii", payload, pos)
        pos += 12
        isr = [INT.unpack_from(payload, pos + 4 * i)[0] for i in range(n)]
        pos += 4 * n
        partitions[partition] = (leader, isr)
    brokers: dict[int, tuple[str, int]] = {}
    count = INT.unpack_from(payload, pos)[0]
    pos += 4
    for _ in range(count):
        broker = INT.unpack_from(payload, pos)[0]
        host, pos = take_str(payload, pos + 4)
        brokers[broker] = (host, INT.unpack_from(payload, pos)[0])
        pos += 4
    return partitions, brokers


_ACK = struct.Struct(">iqiqi")

#: A run of acknowledgements: (id, first number, count, first target offset, code, message).
Ack = tuple[int, int, int, int, int, str]


def acks(body: bytes) -> list[Ack]:
    out: list[Ack] = []
    pos = 4
    for _ in range(INT.unpack_from(body, 0)[0]):
        pid, first, count, offset, code = _ACK.unpack_from(body, pos)
        pos += 28
        message = ""
        if code:
            message, pos = take_str(body, pos)
        out.append((pid, first, count, offset, code, message))
    return out
