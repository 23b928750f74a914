"""How far behind a mirror is, read from the source: offsets and the age of the oldest record waiting.

Read-only: one admin request per offset kind for all partitions, and one consumer that fetches
the first record at each given position (never joins or commits a group).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

PartitionKey = tuple[str, int]

#: ListOffsets errors that mean the admin client's cached leaders are out of date (a broker restarted,
#: leadership moved). librdkafka's admin ListOffsets does not refresh them by itself: seen failing with
#: FENCED_LEADER_EPOCH for minutes after a target broker's restart, until the metadata's own refresh.
_STALE_LEADER = ("FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE")


def list_offsets(admin: AdminClient, request: Mapping[TopicPartition, OffsetSpec]) -> dict[PartitionKey, int]:
    """Offsets of ``request`` by (topic, partition); on a stale leader, the topics' metadata is read
    again (which refreshes the client's cache) and the request made once more."""
    for attempt in (1, 2):
        res = admin.list_offsets(dict(request), request_timeout=30)
        try:
            return {(tp.topic, tp.partition): fut.result().offset for tp, fut in res.items()}
        except Exception as exc:
            if attempt == 2 or not any(code in str(exc) for code in _STALE_LEADER):
                raise
            for topic in sorted({tp.topic for tp in request}):
                admin.list_topics(topic, timeout=10)
    raise AssertionError("unreachable")


def log_bounds(admin: AdminClient, partitions: Mapping[str, int]) -> dict[PartitionKey, tuple[int, int]]:
    """(log start, end) of every partition of ``partitions`` (topic -> partition count)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    keys = [(t, p) for t, n in partitions.items() for p in range(n)]
    if not keys:
        return {}
    found: list[dict[PartitionKey, int]] = []
    for spec in (OffsetSpec.earliest(), OffsetSpec.latest()):
        found.append(list_offsets(admin, {TopicPartition(t, p): spec for t, p in keys}))
    starts, ends = found
    return {k: (starts[k], ends[k]) for k in keys}


@dataclass(frozen=True)
class FirstRecord:
    """The first record found at or after a position."""

    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int


def record_timestamps(
    consumer_conf: Mapping[str, str], positions: Mapping[PartitionKey, int], *, timeout_s: float = 10.0
) -> dict[PartitionKey, int]:
    """The timestamp of the first record at or after each position (partitions with none are left out)."""
    found = first_records(consumer_conf, positions, timeout_s=timeout_s)
    return {k: r.timestamp_ms for k, r in found.items() if r.timestamp_ms > 0}


def first_records(
    consumer_conf: Mapping[str, str], positions: Mapping[PartitionKey, int], *, timeout_s: float = 10.0
) -> dict[PartitionKey, FirstRecord]:
    """The first committed record at or after each position (partitions with none are left out)."""
    if not positions:
        return {}
    from confluent_kafka import KafkaError, TopicPartition

    from sparkmirror.kafka.factory import new_consumer

    consumer = new_consumer(
        {
            **consumer_conf,
            "group.id": "sparkmirror-reader-lag",
            "enable.auto.commit": "false",
            "enable.partition.eof": "true",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            # One record per partition is all we need.
            "max.partition.fetch.bytes": "65536",
        }
    )
    out: dict[PartitionKey, FirstRecord] = {}
    try:
        consumer.assign([TopicPartition(t, p, max(0, off)) for (t, p), off in positions.items()])
        pending = set(positions)
        deadline = time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.2):
                key = (msg.topic() or "", msg.partition() or 0)
                if key not in pending:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        pending.discard(key)
                    continue
                out[key] = FirstRecord(msg.offset() or 0, msg.key(), msg.value(), msg.timestamp()[1])
                pending.discard(key)
                consumer.pause([TopicPartition(key[0], key[1])])
    finally:
        consumer.close()
    return out
