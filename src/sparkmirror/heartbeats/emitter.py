"""Heartbeats in MM2's layout, so replication is visible end to end.

As MM2's heartbeat connectors do, for every enabled flow A->B a heartbeat
(source A, target B, now) goes to the ``heartbeats`` topic on B, and one for
the reverse pair (B, A) to ``heartbeats`` on A. The flow mirrors A's
``heartbeats`` like data, so B's ``A.heartbeats`` shows, record by record,
that A->B is alive and how far behind it runs. Kafka's
``RemoteClusterUtils.upstreamClusters``/``replicationHops`` read these topics.

Heartbeats never block or fail the data flows: an error is logged and the
next beat tries again.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from sparkmirror.core.formats import Heartbeat
from sparkmirror.core.policy import ReplicationPolicy
from sparkmirror.kafka.flowclients import ClusterClients
from sparkmirror.kafka.internal import ensure_topic

if TYPE_CHECKING:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

log = logging.getLogger(__name__)


class HeartbeatEmitter:
    def __init__(self, policy: ReplicationPolicy, interval_s: float) -> None:
        self.policy = policy
        self.interval_s = interval_s
        #: cluster alias -> (producer, admin, replication factor)
        self.clusters: dict[str, tuple[Producer, AdminClient, int]] = {}
        #: (source alias, target alias) pairs, each written into the target cluster.
        self.pairs: set[tuple[str, str]] = set()

    def add_cluster(self, clients: ClusterClients, replication_factor: int) -> None:
        """Heartbeats into ``clients``' cluster (the first replication factor given for it counts)."""
        if clients.alias not in self.clusters:
            from sparkmirror.kafka.factory import new_producer

            producer = new_producer({**clients.producer(), "linger.ms": "0"})
            self.clusters[clients.alias] = (producer, clients.admin, replication_factor)

    def add_flow(self, source: str, target: str) -> None:
        self.pairs.update({(source, target), (target, source)})

    def start(self) -> None:
        topic = self.policy.heartbeats_topic()
        for alias, (_p, admin, rf) in self.clusters.items():
            try:
                ensure_topic(
                    admin,
                    topic,
                    replication_factor=rf,
                    purpose=f"heartbeats on {alias}",
                    key="heartbeats.topic.replication.factor",
                )
            except Exception as exc:  # noqa: BLE001 - heartbeats are advisory
                log.warning("cannot create %s on %s: %s", topic, alias, exc)

    def emit(self) -> int:
        """One heartbeat per flow direction into each target cluster (the run's scheduler calls it every
        ``emit.heartbeats.interval.seconds``)."""
        ts = int(time.time() * 1000)
        topic = self.policy.heartbeats_topic()
        sent = 0
        for source, target in sorted(self.pairs):
            entry = self.clusters.get(target)
            if entry is None:
                continue
            hb = Heartbeat(source, target, ts)
            try:
                entry[0].produce(topic, key=hb.key_bytes(), value=hb.value_bytes())
                entry[0].poll(0)
                sent += 1
            except Exception as exc:  # noqa: BLE001 - never disturb the data flows
                log.warning("heartbeat %s->%s not sent: %s", source, target, exc)
        return sent

    def close(self) -> None:
        for producer, _a, _rf in self.clusters.values():
            producer.flush(5)
        self.clusters.clear()  # the last references: librdkafka destroys the clients now
