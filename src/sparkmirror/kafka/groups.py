"""Consumer-group offsets read and written through a group-less consumer.

confluent-kafka 2.16 (librdkafka 2.16.0) crashes the process (SIGSEGV in
``rd_kafka_cgrp_op`` from ``rd_kafka_handle_OffsetFetch``) when the admin
client's ``list_consumer_group_offsets`` gets a retriable coordinator error,
which happens while a coordinator loads or moves: at cluster start and in a
broker failover. A mirror must survive both. A consumer with the group's id
that never subscribes reads (``committed``) and writes (``commit``) the same
offsets through the code path that handles those errors, and never joins the
group. Seen and traced with gdb here; see docs/decisions.md.

This costs a client per group: for one group at a time (failover, translate,
the copy's progress) and for the groups the concurrent reader could not read:
the checkpoint emitter reads all groups at once through
:mod:`sparkmirror.kafka.groupreader`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from sparkmirror.errors import SparkMirrorError
from sparkmirror.kafka.retry import retry_kafka

if TYPE_CHECKING:
    from confluent_kafka import Consumer


class GroupOffsetsError(SparkMirrorError):
    """A group's offsets could not be read completely."""

    retriable = True


def _consumer(conf: Mapping[str, str], group: str) -> Consumer:
    from sparkmirror.kafka.factory import new_consumer

    return new_consumer({**conf, "group.id": group, "enable.auto.commit": False, "isolation.level": "read_committed"})


def committed_positions(
    conf: Mapping[str, str], group: str, partitions: Iterable[tuple[str, int]], *, timeout_s: float = 30.0
) -> dict[tuple[str, int], tuple[int, str]]:
    """The group's committed (offset, commit metadata) for ``partitions``; those without one are left out."""
    from confluent_kafka import TopicPartition

    tps = [TopicPartition(t, p) for t, p in partitions]
    if not tps:
        return {}
    consumer = _consumer(conf, group)
    try:
        result = retry_kafka(lambda: consumer.committed(tps, timeout=timeout_s), what=f"offsets of group {group}")
    finally:
        consumer.close()
    failed = [f"{tp.topic}[{tp.partition}]: {tp.error}" for tp in result if tp.error is not None]
    if failed:
        # A partition left out would read as "no offset" and could be rewritten.
        raise GroupOffsetsError(f"offsets of group {group} not readable: {'; '.join(failed[:3])}")
    return {(tp.topic, tp.partition): (tp.offset, tp.metadata or "") for tp in result if tp.offset >= 0}


def committed_offsets(
    conf: Mapping[str, str], group: str, partitions: Iterable[tuple[str, int]], *, timeout_s: float = 30.0
) -> dict[tuple[str, int], int]:
    """The group's committed offsets for ``partitions`` (those without one are left out)."""
    positions = committed_positions(conf, group, partitions, timeout_s=timeout_s)
    return {tp: offset for tp, (offset, _metadata) in positions.items()}


def commit_offsets(conf: Mapping[str, str], group: str, offsets: Mapping[tuple[str, int], int]) -> None:
    """Commit offsets for a group that has no active members (the broker refuses otherwise)."""
    from confluent_kafka import TopicPartition

    if not offsets:
        return
    consumer = _consumer(conf, group)
    try:
        tps = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
        retry_kafka(lambda: consumer.commit(offsets=tps, asynchronous=False), what=f"commit for group {group}")
    finally:
        consumer.close()


def commit_positions(conf: Mapping[str, str], group: str, positions: Mapping[tuple[str, int], tuple[int, str]]) -> None:
    """Commit (offset, commit metadata) per partition for a group without active members."""
    from confluent_kafka import TopicPartition

    if not positions:
        return
    consumer = _consumer(conf, group)
    try:
        tps = [TopicPartition(t, p, o, metadata=m) for (t, p), (o, m) in positions.items()]
        retry_kafka(lambda: consumer.commit(offsets=tps, asynchronous=False), what=f"commit for group {group}")
    finally:
        consumer.close()
