"""Sample data for the demo and for trying the mirror out by hand.

Writes records that exercise what a mirror must keep: keys and null keys,
tombstones (null values), headers and explicit timestamps, several partitions.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)

SAMPLE_TOPICS: Mapping[str, int] = {"orders": 4, "payments": 3, "customers": 2}


def create_topics(bootstrap: str, topics: Mapping[str, int], *, config: Mapping[str, str] | None = None) -> None:
    from confluent_kafka.admin import NewTopic

    from sparkmirror.kafka.factory import new_admin

    admin = new_admin({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=30).topics
    new = [
        NewTopic(t, num_partitions=n, replication_factor=-1, config=dict(config or {}))
        for t, n in topics.items()
        if t not in existing
    ]
    if not new:
        return
    for fut in admin.create_topics(new, operation_timeout=30).values():
        fut.result()


def produce_sample(
    bootstrap: str,
    topics: Mapping[str, int] = SAMPLE_TOPICS,
    *,
    records_per_topic: int = 5000,
    seed_time_ms: int | None = None,
) -> dict[str, int]:
    """Create the topics if needed and write ``records_per_topic`` to each."""
    from sparkmirror.kafka.factory import new_producer

    create_topics(bootstrap, topics)
    base_ts = seed_time_ms if seed_time_ms is not None else int(time.time() * 1000) - 3_600_000
    errors: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    producer = new_producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": "true", "linger.ms": "20"}
    )
    counts = {}
    for topic, partitions in topics.items():
        for i in range(records_per_topic):
            key = None if i % 10 == 0 else f"{topic}-key-{i % 500}".encode()
            value = None if i % 50 == 7 else f'{{"topic":"{topic}","seq":{i}}}'.encode()
            while True:
                try:
                    producer.produce(
                        topic,
                        key=key,
                        value=value,
                        partition=i % partitions,
                        timestamp=base_ts + i,
                        headers=[("source", b"sparkmirror-demo"), ("seq", str(i).encode())],
                        on_delivery=on_delivery,
                    )
                    break
                except BufferError:
                    producer.poll(0.1)
        counts[topic] = records_per_topic
    producer.flush(60)
    if errors:
        raise RuntimeError(f"sample data could not be written: {errors[0]}")
    log.info("wrote %d sample records to %s", sum(counts.values()), bootstrap)
    return counts
