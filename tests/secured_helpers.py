"""Helpers for tests on secured clusters: client settings as the dev clusters' users, produce,
read back, and the secrets that must never show up anywhere."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_helpers import unique
from sparkmirror.devcluster.cluster import DevClusters
from sparkmirror.devcluster.security import USERS, SecurityMaterial


@dataclass
class Secured:
    clusters: DevClusters
    security: str
    bootstraps: dict[str, str]

    @property
    def material(self) -> SecurityMaterial:
        return self.clusters.security()

    def conf(self, alias: str, user: str = "mirror") -> dict[str, Any]:
        """confluent-kafka settings for ``user`` on cluster ``alias``."""
        return {"bootstrap.servers": self.bootstraps[alias], **self.material.librdkafka_settings(self.security, user)}

    def secrets(self) -> list[str]:
        """Every password of these clusters (the stores' and each user's)."""
        return [self.material.password(u) for u in ("store", "broker", *USERS)]

    def admin(self, alias: str, user: str = "mirror") -> AdminClient:
        return AdminClient(self.conf(alias, user))

    def create_topics(self, alias: str, topics: Mapping[str, int]) -> None:
        client = self.admin(alias)
        for f in client.create_topics([NewTopic(t, n, 1) for t, n in topics.items()], operation_timeout=30).values():
            f.result()

    def produce(self, alias: str, topic: str, values: Iterable[bytes], partition: int = 0) -> None:
        p = Producer({**self.conf(alias), "acks": "all", "enable.idempotence": True})
        for v in values:
            p.produce(topic, value=v, partition=partition)
        assert p.flush(60) == 0

    def read(self, alias: str, topic: str, partition: int = 0, timeout_s: float = 60) -> list[bytes]:
        """Every committed value of ``topic[partition]`` from the start to its current end."""
        c = Consumer(
            {**self.conf(alias), "group.id": unique("reader"), "enable.auto.commit": False,
             "isolation.level": "read_committed", "auto.offset.reset": "earliest", "enable.partition.eof": True}
        )  # fmt: skip
        try:
            c.assign([TopicPartition(topic, partition, 0)])
            out: list[bytes] = []
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                msg = c.poll(1.0)
                if msg is None:
                    continue
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        return out  # transaction markers need no special case
                    continue
                out.append(msg.value())
            raise AssertionError(f"{topic}[{partition}] not read to its end in {timeout_s}s")
        finally:
            c.close()


def assert_no_secret(texts: Mapping[str, str], secrets: Iterable[str]) -> None:
    """No secret (nor its first 8 characters, a truncated one) in any of ``texts``."""
    for name, text in texts.items():
        for secret in secrets:
            assert secret not in text, f"a secret shows in {name}"
            assert secret[:8] not in text, f"the start of a secret shows in {name}"
