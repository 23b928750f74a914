"""A read through either client hands the task each partition's records together, in offset order, and
the events in the order they came (``clients.take``; the transport's ``TransportConsumer.take``, fed
'R' frames as the JVM writes them, without a JVM: tests/integration/test_transport.py runs one)."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from confluent_kafka import KafkaError, TopicPartition

from source_messages import SourceMessage
from sparkmirror.pipeline.executor import clients
from sparkmirror.pipeline.transport import client, frames


def _r_frame(moves: int, runs: list[tuple[int, list[int]]], ends: list[tuple[int, int]] = ()) -> bytes:  # type: ignore[assignment]
    """An 'R' frame body as TransportServer.java writes it: each partition's records (value b"v<offset>")."""
    body = bytearray(struct.pack(">ii", moves, len(runs)))
    for pid, offsets in runs:
        body += struct.pack(">ii", pid, len(offsets))
        for o in offsets:
            body += struct.pack(">qqi", o, 1000 + o, -1)
            frames.put_bytes(body, b"v%d" % o)
            body += frames.INT.pack(0)
    body += frames.INT.pack(0)  # no positions
    body += frames.INT.pack(len(ends))
    for pid, offset in ends:
        body += struct.pack(">iq", pid, offset)
    return bytes(body)


class _Conn:
    """The JVM's side of the socket: what the consumer sent, and the frames it is to read."""

    def __init__(self, _role: str, _settings: object) -> None:
        self.sent: list[bytes] = []
        self.incoming: list[tuple[str, bytes]] = []
        self.closed = False

    def send(self, data: bytes) -> None:
        self.sent.append(bytes(data))

    def next(self, _timeout: float) -> tuple[str, bytes] | None:
        return self.incoming.pop(0) if self.incoming else None

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def consumer(monkeypatch: pytest.MonkeyPatch) -> client.TransportConsumer:
    monkeypatch.setattr(client, "_Connection", _Conn)
    c = client.TransportConsumer({})
    c.assign([TopicPartition("t", 0, 10), TopicPartition("t", 1, 20)])  # ids 0 and 1, the assignment is move 1
    return c


def _conn(c: client.TransportConsumer) -> _Conn:
    return c._conn  # type: ignore[return-value]


def _offsets(runs: dict[tuple[str, int], list[frames.Read]]) -> dict[tuple[str, int], list[int]]:
    return {key: [r[0] for r in run] for key, run in runs.items()}


def test_a_frame_hands_each_partition_s_records_together_then_its_events(consumer: client.TransportConsumer) -> None:
    _conn(consumer).incoming.append(("R", _r_frame(1, [(0, [10, 11]), (1, [20])], ends=[(0, 12)])))
    runs, events, taken = consumer.take(0.0, 100)
    assert _offsets(runs) == {("t", 0): [10, 11], ("t", 1): [20]}
    assert runs[("t", 0)][0] == (10, None, b"v10", 1010, None)  # as the sink takes it
    assert [(e.topic(), e.partition(), e.offset(), e.error().code()) for e in events] == [  # type: ignore[union-attr]
        ("t", 0, 12, KafkaError._PARTITION_EOF)
    ]
    assert taken == 4
    assert consumer.take(0.0, 100) == ({}, [], 0)


def test_a_read_with_little_room_leaves_the_rest_in_order_and_an_end_after_its_records(
    consumer: client.TransportConsumer,
) -> None:
    _conn(consumer).incoming.append(("R", _r_frame(1, [(0, [10, 11]), (1, [20])], ends=[(0, 12)])))
    first = consumer.take(0.0, 1)
    assert (_offsets(first[0]), first[1], first[2]) == ({("t", 0): [10]}, [], 1)
    second = consumer.take(0.0, 2)
    assert (_offsets(second[0]), second[1], second[2]) == ({("t", 0): [11], ("t", 1): [20]}, [], 2)
    runs, events, taken = consumer.take(0.0, 2)
    assert (runs, [e.offset() for e in events], taken) == ({}, [12], 1)


def test_records_fetched_before_a_seek_the_jvm_had_not_run_are_dropped(consumer: client.TransportConsumer) -> None:
    conn = _conn(consumer)
    conn.incoming.append(("R", _r_frame(1, [(0, [10, 11]), (1, [20])])))
    consumer.take(0.0, 1)  # the frame is read: 11 and 20 wait
    consumer.seek(TopicPartition("t", 0, 5))  # move 2: what waits of partition 0 is dropped
    conn.incoming.append(("R", _r_frame(1, [(0, [12]), (1, [21])])))  # sent before the JVM ran the seek
    conn.incoming.append(("R", _r_frame(2, [(0, [5])])))
    seen: dict[tuple[str, int], list[int]] = {}
    for _ in range(3):
        for key, offsets in _offsets(consumer.take(0.0, 100)[0]).items():
            seen.setdefault(key, []).extend(offsets)
    assert seen == {("t", 1): [20, 21], ("t", 0): [5]}


def test_an_error_frame_is_an_event_of_its_partition(consumer: client.TransportConsumer) -> None:
    body = struct.pack(">iib", 1, 1, 0) + b"".join(
        frames.INT.pack(len(x)) + x for x in (b"OFFSET_OUT_OF_RANGE", b"gone")
    )
    _conn(consumer).incoming.append(("X", body))
    runs, events, taken = consumer.take(0.0, 10)
    assert runs == {} and taken == 1
    assert (events[0].topic(), events[0].partition(), events[0].error().code()) == ("t", 1, 1)  # type: ignore[union-attr]


class _Librdkafka:
    """librdkafka's consumer as a read uses it: ``poll`` then ``consume`` of what is there."""

    def __init__(self, msgs: list[SourceMessage]) -> None:
        self.msgs = msgs
        self.asked: list[int] = []

    def poll(self, _timeout: float) -> SourceMessage | None:
        return self.msgs.pop(0) if self.msgs else None

    def consume(self, n: int, _timeout: float) -> list[SourceMessage]:
        self.asked.append(n)
        out, self.msgs = self.msgs[:n], self.msgs[n:]
        return out


def test_librdkafka_s_messages_are_grouped_by_partition_as_records_and_events() -> None:
    eof = SourceMessage("t", 1, 3, err=KafkaError(KafkaError._PARTITION_EOF))
    msgs = [SourceMessage("t", 0, 1), SourceMessage("t", 1, 2, ts=-1), eof, SourceMessage("t", 0, 2), SourceMessage()]
    reader: Any = _Librdkafka(list(msgs))
    runs, events, taken = clients.take(reader, 0.5, 4)
    assert runs == {("t", 0): [msgs[0].record(), msgs[3].record()], ("t", 1): [(2, b"k", b"v", -1, None)]}
    assert events == [eof] and taken == 4 and reader.asked == [3]
    assert clients.take(reader, 0.5, 1)[2] == 1 and reader.asked == [3], "room 1: the first only"
    assert clients.take(reader, 0.5, 10) == ({}, [], 0)
