"""Read-only views of both clusters: how many records each topic holds.

Used by the end-of-run summary and the demo. Never writes to a cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TopicCounts:
    source_topic: str
    remote_topic: str
    partitions: int
    source_records: int
    target_records: int


def watermarks(admin: Any, topic: str, partitions: int) -> list[tuple[int, int]]:
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


def topic_counts(flow: Any, source_admin: Any, target_admin: Any, topics: dict[str, int]) -> list[TopicCounts]:
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
