"""The task transport (``sparkmirror.transport = java``) on real brokers, without Spark: its consumer and
producer objects give the copy what librdkafka's give it (records byte for byte, positions, ends, the
errors by the same names), and one JVM serves several clients, each closed on its own."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, TopicPartition

from kafka_helpers import Rec, create_topics, produce, read_partition, unique, varied_records
from sparkmirror.pipeline.executor import clients
from sparkmirror.pipeline.transport import launcher
from sparkmirror.pipeline.transport.client import Message, TransportConsumer, TransportProducer
from sparkmirror.pipeline.transport.frames import Read

READER = {"enable.auto.commit": "false", "isolation.level": "read_committed", "auto.offset.reset": "none"}


@pytest.fixture
def transport_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SPARKMIRROR_TRANSPORT_DIR", str(tmp_path / "transport"))
    return tmp_path / "transport"


def _read_all(
    consumer: TransportConsumer, want: int, *, timeout_s: float = 60.0
) -> tuple[list[tuple[int, Read]], list[Message]]:
    """Records (partition, record) and events until ``want`` records came."""
    records: list[tuple[int, Read]] = []
    events: list[Message] = []
    deadline = time.monotonic() + timeout_s
    while len(records) < want and time.monotonic() < deadline:
        runs, more, _taken = consumer.take(0.5, 1000)
        for (_topic, p), run in runs.items():
            records += [(p, r) for r in run]
        events += more
    return records, events


def test_records_go_through_both_clients_byte_for_byte_with_their_target_offsets(bootstraps, transport_dir) -> None:
    topic, remote = unique("transport"), unique("transport-remote")
    create_topics(bootstraps["A"], {topic: 2})
    create_topics(bootstraps["B"], {remote: 2})
    sent = {p: varied_records(p, 300 + 100 * p) for p in range(2)}
    for p, recs in sent.items():
        produce(bootstraps["A"], topic, p, recs)
    consumer = TransportConsumer({"bootstrap.servers": bootstraps["A"], **READER}, partition_eof=True)
    producer = TransportProducer({"bootstrap.servers": bootstraps["B"], "acks": "all", "enable.idempotence": "true"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 10)])
        records, events = _read_all(consumer, 300 + 390)
        by_partition: dict[int, list[Read]] = {0: [], 1: []}
        for p, r in records:
            by_partition[p].append(r)
        assert [r[0] for r in by_partition[0]] == list(range(300))
        assert [r[0] for r in by_partition[1]] == list(range(10, 400))
        got = [Rec(key, value, tuple(headers or ()), ts) for _o, key, value, ts, headers in by_partition[0]]
        assert got == sent[0]
        # Each partition's end is said once the consumer reached it (partition EOF), with its position.
        deadline = time.monotonic() + 10
        while len({(e.partition(), e.offset()) for e in events}) < 2 and time.monotonic() < deadline:
            events += consumer.take(0.5, 10)[1]
        assert {(e.partition(), e.offset()) for e in events} == {(0, 300), (1, 400)}
        assert all(e.error().code() == KafkaError._PARTITION_EOF for e in events)  # type: ignore[union-attr]
        positions = consumer.position([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        assert [tp.offset for tp in positions] == [300, 400]
        assert consumer.get_watermark_offsets(TopicPartition(topic, 1), cached=True)[1] == 400
        # The task's look at many ends at once: the same ends, a partition it never named left out.
        ends = clients.cached_ends(consumer, [(topic, 0), (topic, 1), (topic, 9)])
        assert ends == [((topic, 0), 300), ((topic, 1), 400)]

        reports: list[tuple[int, int, int | None]] = []  # (partition, source offset, target offset)
        for p, (offset, key, value, ts, headers) in records:

            def delivered(err, msg, src=offset):  # noqa: ANN001, ANN202 - the offset of this loop's record
                assert err is None, err
                reports.append((msg.partition(), src, msg.offset()))

            producer.produce(remote, value, key, p, delivered, None, ts, headers)
        assert producer.flush(60) == 0
        assert len(producer) == 0
        # Each partition's reports in the order its records were produced, each with its target offset.
        for p, first in ((0, 0), (1, 10)):
            mine = [(s, t) for q, s, t in reports if q == p]
            assert [s for s, _t in mine] == [r[0] for r in by_partition[p]]
            assert [t for _s, t in mine] == list(range(len(mine)))
            assert mine[0][0] == first
        assert read_partition(bootstraps["B"], remote, 0) == sent[0]
        assert read_partition(bootstraps["B"], remote, 1) == sent[1][10:]
    finally:
        consumer.close()
        producer.close()


def test_errors_come_by_librdkafka_names_and_in_produce_order(bootstraps, transport_dir) -> None:
    topic = unique("transport-errors")
    create_topics(bootstraps["B"], {topic: 1}, {"message.timestamp.before.max.ms": "60000"})
    producer = TransportProducer({"bootstrap.servers": bootstraps["B"], "acks": "all", "enable.idempotence": "true"})
    reports: list[tuple[int, str | None, int | None]] = []
    now = int(time.time() * 1000)
    try:
        for i, ts in enumerate([now, now - 3_600_000, now, now]):
            producer.produce(
                topic, b"x", None, 0,
                lambda err, msg, i=i: reports.append((i, err.name() if err else None, msg.offset())), None, ts,
            )  # fmt: skip
            producer.flush(30)  # one batch each: the broker refuses only the old record's
        assert producer.flush(60) == 0
    finally:
        producer.close()
    assert [r[0] for r in reports] == [0, 1, 2, 3]
    assert [r[1] for r in reports] == [None, "INVALID_TIMESTAMP", None, None]  # the sink's record error
    assert [r[2] for r in reports if r[1] is None] == [0, 1, 2]

    # A position the source no longer holds is an error of that partition (auto.offset.reset = none).
    source = unique("transport-range")
    create_topics(bootstraps["A"], {source: 1})
    produce(bootstraps["A"], source, 0, varied_records(0, 5))
    consumer = TransportConsumer({"bootstrap.servers": bootstraps["A"], **READER})
    try:
        consumer.assign([TopicPartition(source, 0, 50)])
        _records, events = _read_all(consumer, 1, timeout_s=15)
        assert events, "no error for an offset out of range"
        assert events[0].error().code() == KafkaError.OFFSET_OUT_OF_RANGE  # type: ignore[union-attr]
        assert (events[0].topic(), events[0].partition()) == (source, 0)
        # Sought back into range, it reads again.
        consumer.seek(TopicPartition(source, 0, 2))
        records, _events = _read_all(consumer, 3, timeout_s=30)
        assert [r[0] for _p, r in records] == [2, 3, 4]
    finally:
        consumer.close()


def test_one_jvm_serves_every_client_and_a_closed_client_takes_no_other_with_it(bootstraps, transport_dir) -> None:
    topic = unique("transport-shared")
    create_topics(bootstraps["A"], {topic: 1})
    produce(bootstraps["A"], topic, 0, varied_records(0, 20))
    first = TransportConsumer({"bootstrap.servers": bootstraps["A"], **READER})
    second = TransportConsumer({"bootstrap.servers": bootstraps["A"], **READER})
    try:
        port_file = transport_dir / launcher.PORT_FILE
        pid = port_file.read_text().split()[2]
        first.assign([TopicPartition(topic, 0, 0)])
        second.assign([TopicPartition(topic, 0, 0)])
        assert len(_read_all(first, 20)[0]) == 20
        first.close()
        produce(bootstraps["A"], topic, 0, varied_records(0, 5, first=20))
        assert len(_read_all(second, 25)[0]) == 25
        third = TransportConsumer({"bootstrap.servers": bootstraps["A"], **READER})
        third.close()
        assert port_file.read_text().split()[2] == pid  # the same JVM served all three
    finally:
        second.close()


def test_after_a_seek_no_record_fetched_before_it_is_handed_out(bootstraps, transport_dir) -> None:
    """librdkafka drops what it fetched before a seek, and the task counts on it (a paused partition is
    resumed where the task stands): so does the transport, also for frames already on their way."""
    topic = unique("transport-seek")
    create_topics(bootstraps["A"], {topic: 1})
    produce(bootstraps["A"], topic, 0, varied_records(0, 3000))
    consumer = TransportConsumer({"bootstrap.servers": bootstraps["A"], **READER, "max.poll.records": "100"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        first: list[Read] = []
        while not first:
            first = consumer.take(1.0, 1)[0].get((topic, 0), [])
        assert first[0][0] == 0
        time.sleep(1)  # the JVM sends its next frames ahead meanwhile
        for target in (2000, 5, 1500):
            consumer.seek(TopicPartition(topic, 0, target))
            run: list[Read] = []
            while not run:
                run = consumer.take(1.0, 51)[0].get((topic, 0), [])
            assert [r[0] for r in run] == list(range(target, target + len(run)))
    finally:
        consumer.close()
