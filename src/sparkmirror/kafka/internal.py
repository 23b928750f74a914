"""Internal topics (offset map, checkpoints, heartbeats, offset syncs): create and read them.

Internal topics are small and compacted (heartbeats excepted). Reading one
"to the end" means up to the last stable offset with ``read_committed``: the
offset map is written inside transactions in exactly-once mode, and a reader
that stopped at the high watermark could wait for records it may never see.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from sparkmirror.errors import ConfigError, SparkMirrorError
from sparkmirror.kafka.retry import retry_kafka

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message, Producer
    from confluent_kafka.admin import AdminClient

log = logging.getLogger(__name__)


class InternalTopicError(SparkMirrorError):
    """An internal topic could not be created or read."""

    retriable = True


def ensure_topic(
    admin: AdminClient,
    name: str,
    *,
    partitions: int = 1,
    replication_factor: int = -1,
    config: Mapping[str, str] | None = None,
    purpose: str = "",
    key: str | None = None,
) -> bool:
    """Create ``name`` if it does not exist; True when it exists afterwards.

    Created with the configured replication factor or not at all: a cluster with fewer brokers up
    than ``replication_factor`` gets a :class:`ConfigError` naming the topic, the factor, the
    brokers up and ``key`` (the setting to change), never a topic that stays under-replicated
    for good once the missing brokers are back.
    """
    from confluent_kafka.admin import NewTopic

    md = retry_kafka(lambda: admin.list_topics(timeout=30), what=f"list topics for {name}")
    if name in md.topics and md.topics[name].error is None:
        return True
    rf = int(replication_factor)
    if rf > len(md.brokers):
        setting = key or "its *.replication.factor key"
        raise ConfigError(
            f"{setting}: internal topic {name} ({purpose or 'internal topic'}) needs replication factor {rf} but "
            f"only {len(md.brokers)} broker(s) are up; start the missing brokers and run again, or set "
            f"{setting} to at most {len(md.brokers)} (-1: the broker's default)",
            key=key,
        )
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=rf, config=dict(config or {}))],
        operation_timeout=30,
    )
    for fut in futures.values():
        try:
            fut.result()
        except Exception as exc:  # noqa: BLE001
            if "TOPIC_ALREADY_EXISTS" in str(exc):
                return True
            raise InternalTopicError(f"cannot create internal topic {name}: {exc}") from None
    log.info("created internal topic %s (%s)", name, purpose)
    return True


COMPACTED = {"cleanup.policy": "compact"}

#: Compacted topics that sparkmirror reads back whole at every start (offset map, checkpoints,
#: status) and that rewrite the same keys all the time (at-least-once extends a partition's last
#: segment every commit interval; a checkpoint pass rewrites every moved group). Kafka's log cleaner never
#: touches the active log segment, which rolls at 1 GiB or after 7 days by default: a read-back
#: could wade through a GiB of superseded records (~13 million). 8 MiB segments rolled at least
#: hourly keep what a start reads near the live keys plus a few MiB.
COMPACTED_READ_BACK = {**COMPACTED, "segment.bytes": str(8 * 1024 * 1024), "segment.ms": str(3_600_000)}


def produce_durably(
    producer: Producer, topic: str, records: Iterable[tuple[bytes, bytes | None]], *, what: str
) -> None:
    """Produce (key, value) records to ``topic`` and wait until every one is acknowledged.

    Raises :class:`InternalTopicError` naming ``what`` when any record failed
    or was still unacknowledged after 60 s.
    """
    errors: list[str] = []

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            errors.append(err.str())

    for key, value in records:
        producer.produce(topic, key=key, value=value, on_delivery=on_delivery)
    remaining = producer.flush(60)
    if remaining or errors:
        raise InternalTopicError(
            f"{what} not written to {topic}: " + ("; ".join(errors[:3]) or f"{remaining} unacknowledged")
        )


def read_to_end(
    consumer_conf: Mapping[str, str], topic: str, *, timeout_s: float = 120.0
) -> Iterator[tuple[bytes | None, bytes | None]]:
    """Every (key, value) of ``topic`` (all partitions), from the start to the current end."""
    for key, value, _ts in read_to_end_timed(consumer_conf, topic, timeout_s=timeout_s):
        yield key, value


def read_to_end_timed(
    consumer_conf: Mapping[str, str], topic: str, *, timeout_s: float = 120.0
) -> Iterator[tuple[bytes | None, bytes | None, int]]:
    """Every (key, value, timestamp ms) of ``topic`` (all partitions), from the start to the current end."""
    import time

    from confluent_kafka import KafkaError, TopicPartition

    from sparkmirror.kafka.factory import new_consumer

    consumer = new_consumer(
        {
            **consumer_conf,
            "group.id": f"sparkmirror-reader-{topic}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        md = retry_kafka(lambda: consumer.list_topics(topic, timeout=30), what=f"metadata of {topic}")
        tmd = md.topics.get(topic)
        if tmd is not None and tmd.error is not None and tmd.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            # refused is not empty; the code's name lets callers say who was refused (kafka/access.py)
            raise InternalTopicError(f"cannot read {topic}: {tmd.error.name()}: {tmd.error.str()}")
        if tmd is None or tmd.error is not None:
            return
        parts = list(tmd.partitions)
        ends = {}
        for p in parts:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            ends[p] = high
        pending = {p for p in parts if ends[p] > 0}
        if not pending:
            return
        consumer.assign([TopicPartition(topic, p, 0) for p in pending])
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise InternalTopicError(f"reading {topic} to its end took longer than {timeout_s:.0f}s")
            # consume() waits its whole timeout unless the batch fills: drain what is
            # queued, and wait (for one record) only when nothing is.
            for msg in consumer.consume(1000, 0) or consumer.consume(1, 0.2):
                err = msg.error()
                if err is not None:
                    if err.code() == err._PARTITION_EOF:
                        eof_part = msg.partition() or 0
                        # read_committed stops at the last stable offset: an
                        # open transaction hides what follows it. Only the
                        # high watermark seen at the start is "the end".
                        pos = consumer.position([TopicPartition(topic, eof_part)])[0].offset or 0
                        if pos >= ends[eof_part]:
                            pending.discard(eof_part)
                        else:
                            time.sleep(0.2)
                        continue
                    raise InternalTopicError(f"reading {topic}[{msg.partition()}]: {err.str()}")
                yield msg.key(), msg.value(), msg.timestamp()[1]
                part, off = msg.partition(), msg.offset()
                if part is not None and off is not None and off >= ends[part] - 1:
                    pending.discard(part)
    finally:
        consumer.close()
