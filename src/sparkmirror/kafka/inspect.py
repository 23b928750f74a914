"""Read-only views of both clusters: how many records each topic holds.

Used by the end-of-run summary, the demo and failover plans. Never writes to a cluster.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkmirror.config.model import FlowConfig
from sparkmirror.errors import SparkMirrorError
from sparkmirror.kafka.retry import retry_kafka

if TYPE_CHECKING:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient


class KafkaInspectError(SparkMirrorError):
    """A partition could not be read to count its records."""

    retriable = True


@dataclass(frozen=True)
class TopicCounts:
    source_topic: str
    remote_topic: str
    partitions: int
    source_records: int
    target_records: int


def watermarks(admin: AdminClient, topic: str, partitions: int) -> list[tuple[int, int]]:
    """(earliest, latest) offsets per partition of ``topic``."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    out = []
    for spec in (OffsetSpec.earliest(), OffsetSpec.latest()):
        req = {TopicPartition(topic, p): spec for p in range(partitions)}
        res = admin.list_offsets(req, request_timeout=30)
        out.append({tp.partition: fut.result().offset for tp, fut in res.items()})
    lows, highs = out
    return [(lows[p], highs[p]) for p in range(partitions)]


def topic_counts(
    flow: FlowConfig, source_admin: AdminClient, target_admin: AdminClient, topics: dict[str, int]
) -> list[TopicCounts]:
    target_md = target_admin.list_topics(timeout=30).topics
    rows = []
    for topic, partitions in sorted(topics.items()):
        remote = flow.policy.format_remote_topic(flow.source, topic)
        src = sum(h - lo for lo, h in watermarks(source_admin, topic, partitions))
        tgt = 0
        if remote in target_md:
            tgt = sum(h - lo for lo, h in watermarks(target_admin, remote, len(target_md[remote].partitions)))
        rows.append(TopicCounts(topic, remote, partitions, src, tgt))
    return rows


def _reader(consumer_conf: Mapping[str, str]) -> Consumer:
    from sparkmirror.kafka.factory import new_consumer

    return new_consumer(
        {
            **consumer_conf,
            "group.id": "sparkmirror-reader-inspect",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )


def partition_bounds(consumer_conf: Mapping[str, str], topic: str, partition: int) -> tuple[int, int]:
    """(log start offset, high watermark) of ``topic[partition]``."""
    from confluent_kafka import TopicPartition

    consumer = _reader(consumer_conf)
    try:
        low, high = retry_kafka(
            lambda: consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30),
            what=f"watermarks of {topic}[{partition}]",
        )
        return int(low), int(high)
    finally:
        consumer.close()


def count_records(
    consumer_conf: Mapping[str, str], topic: str, partition: int, start: int, end: int, *, cap: int = 200_000
) -> int:
    """Committed records of ``topic[partition]`` at offsets ``[start, end)``, as a ``read_committed``
    consumer sees them: transaction markers and aborted records do not count.

    Reads at most ``cap`` records; beyond that the offset distance ``end - start`` is returned (an
    upper bound, never an undercount). Records of a transaction still open are not counted.
    """
    from confluent_kafka import TopicPartition

    if end <= start:
        return 0
    consumer = _reader(consumer_conf)
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        counted = 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0) or consumer.consume(1, 0.5):
                err = msg.error()
                if err is not None:
                    if err.code() == err._PARTITION_EOF:
                        return counted
                    raise KafkaInspectError(f"reading {topic}[{partition}] from offset {start}: {err.str()}")
                offset = msg.offset() or 0
                if offset >= end:
                    return counted
                counted += 1
                if counted >= cap:
                    return end - start
                if offset == end - 1:
                    return counted
        raise KafkaInspectError(f"counting {topic}[{partition}] offsets {start}..{end} took longer than 60s")
    finally:
        consumer.close()
