"""The one place that turns a typed configuration into Kafka client settings.

:class:`FlowClients` builds every client configuration of one flow from its
:class:`~sparkmirror.config.model.FlowConfig` once (source and target consumers, the writer's
producer, the source producer of MM2's offset syncs, both admins); :class:`ClusterClients` does
the same for one cluster of a
:class:`~sparkmirror.config.model.MirrorConfig` (failover, heartbeats). The run, translate,
failover and the client API take their settings from here instead of revealing and converting
properties themselves. A flow's settings are built on first use, once, so that a read-only caller
(translate) builds only what it reads; :meth:`FlowClients.validate` builds them all.

What it must never do: show a secret. The configurations it holds carry credentials, so neither
class prints them (their reprs name the flow or cluster only) and errors name keys, never values.
"""

from __future__ import annotations

import threading
from functools import cached_property
from typing import TYPE_CHECKING

from sparkmirror.config.model import ClusterConfig, FlowConfig, reveal
from sparkmirror.kafka.access import AUTHENTICATION_CODES
from sparkmirror.kafka.clients import (
    admin_config,
    java_config,
    java_producer_config,
    librdkafka_config,
    producer_config,
    validate_librdkafka,
)

if TYPE_CHECKING:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient


class _Admins:
    """Admin clients made on first use, once (they hold connections and a thread each).

    Each remembers the last authentication failure librdkafka reported for it (``error_cb``): a
    refused password shows up as nothing but timed-out requests otherwise.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made: dict[str, AdminClient] = {}
        #: admin name -> what librdkafka said when the cluster refused to authenticate it.
        self.authentication_failures: dict[str, str] = {}

    def get(self, name: str, conf: dict[str, str]) -> AdminClient:
        with self._lock:
            admin = self._made.get(name)
            if admin is None:
                from sparkmirror.kafka.factory import new_admin

                def on_error(err: KafkaError) -> None:
                    if err.name() in AUTHENTICATION_CODES:
                        self.authentication_failures[name] = err.str()

                admin = self._made[name] = new_admin({**conf, "error_cb": on_error})  # type: ignore[dict-item]
            return admin

    def poll(self) -> None:
        with self._lock:
            made = list(self._made.values())
        for admin in made:
            admin.poll(0)

    def close(self) -> None:
        """Let go of the admin clients (the last reference: librdkafka destroys them now)."""
        with self._lock:
            self._made.clear()


class ClusterClients:
    """Client settings for one cluster, secrets revealed only into them.

    ``quiet``: librdkafka logs errors only, for read-only tools that expect a cluster not to
    answer (failover) and say so themselves.
    """

    def __init__(self, cluster: ClusterConfig, *, quiet: bool = False) -> None:
        self.alias = cluster.alias
        self.cluster = cluster
        self.consumer = librdkafka_config(reveal(cluster.consumer_props, True), role="consumer")
        self.admin_config = admin_config(reveal(cluster.admin_props, True))
        if quiet:
            self.consumer["log_level"] = self.admin_config["log_level"] = "3"
        self._admins = _Admins()

    def producer(self) -> dict[str, str]:
        """A producer to this cluster (heartbeats); built on request: only producing paths check it."""
        return producer_config(reveal(self.cluster.producer_props, True), key_prefix=f"{self.alias}.producer")

    @property
    def admin(self) -> AdminClient:
        return self._admins.get("admin", self.admin_config)

    def validate(self) -> None:
        """Have librdkafka check the consumer and admin settings now (a refused one exits 2)."""
        validate_librdkafka(self.consumer, role=f"cluster {self.alias} consumer", key_hint=f"{self.alias}.consumer")
        validate_librdkafka(self.admin_config, role=f"cluster {self.alias} admin", key_hint=f"{self.alias}.admin")

    def authentication_failure(self) -> str | None:
        """What librdkafka said when this cluster refused to authenticate the admin client; None if not."""
        self._admins.poll()
        return self._admins.authentication_failures.get("admin")

    def close(self) -> None:
        self._admins.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.alias})"


class FlowClients:
    """Every Kafka client setting of one flow A->B, built once from its :class:`FlowConfig`."""

    def __init__(self, flow: FlowConfig) -> None:
        self.flow = flow
        self._admins = _Admins()

    @cached_property
    def source_consumer(self) -> dict[str, str]:
        """librdkafka consumer of the source (the copy tasks' reader, source group offsets)."""
        return librdkafka_config(self.flow.source_consumer_props(reveal_secrets=True), role="consumer")

    @cached_property
    def target_consumer(self) -> dict[str, str]:
        """librdkafka consumer of the target (internal topics, the copy's progress)."""
        return librdkafka_config(self.flow.target_consumer_props(reveal_secrets=True), role="consumer")

    @cached_property
    def target_producer(self) -> dict[str, str]:
        """The writer's producer to the target: Java defaults, operator overrides, then safety."""
        flow = self.flow
        return producer_config(flow.target_producer_props(reveal_secrets=True), key_prefix=f"{flow.target}.producer")

    @cached_property
    def java_source_consumer(self) -> dict[str, str]:
        """The source consumer's settings as written, by the Java client's names (the transport's reader)."""
        return java_config(self.flow.source_consumer_props(reveal_secrets=True))

    @cached_property
    def java_target_producer(self) -> dict[str, str]:
        """:attr:`target_producer` by the Java client's names (the transport's writer)."""
        return java_producer_config(self.flow.target_producer_props(reveal_secrets=True))

    @cached_property
    def source_producer(self) -> dict[str, str]:
        """A producer to the source (MM2's offset syncs, when they are kept on the source)."""
        flow = self.flow
        return producer_config(reveal(flow.source_cluster.producer_props, True), key_prefix=f"{flow.source}.producer")

    @cached_property
    def source_admin_config(self) -> dict[str, str]:
        return admin_config(self.flow.source_admin_props(reveal_secrets=True))

    @cached_property
    def target_admin_config(self) -> dict[str, str]:
        return admin_config(self.flow.target_admin_props(reveal_secrets=True))

    @property
    def source_admin(self) -> AdminClient:
        return self._admins.get("source", self.source_admin_config)

    @property
    def target_admin(self) -> AdminClient:
        return self._admins.get("target", self.target_admin_config)

    @property
    def internal_producer(self) -> dict[str, str]:
        """The target producer for internal topics (offset map, checkpoints): never transactional."""
        return {k: v for k, v in self.target_producer.items() if k != "transactional.id"}

    def validate(self) -> None:
        """Build every client setting and have librdkafka check them now, before Spark starts (a refused
        one exits 2, rather than when a chore first uses it)."""
        _built = (
            self.source_consumer,
            self.target_consumer,
            self.target_producer,
            self.source_producer,
            self.source_admin_config,
            self.target_admin_config,
        )
        flow = self.flow
        validate_librdkafka(
            self.target_producer, role=f"flow={flow.name} target producer", key_hint=f"{flow.target}.producer"
        )
        validate_librdkafka(
            self.source_consumer, role=f"flow={flow.name} source consumer", key_hint=f"{flow.source}.consumer"
        )
        for props, role, hint in (
            (flow.source_admin_props(reveal_secrets=True), "source admin", f"{flow.source}.admin"),
            (flow.target_admin_props(reveal_secrets=True), "target admin", f"{flow.target}.admin"),
            (flow.target_consumer_props(reveal_secrets=True), "target consumer", f"{flow.target}.consumer"),
        ):
            validate_librdkafka(librdkafka_config(props, role=role), role=f"flow={flow.name} {role}", key_hint=hint)

    def authentication_failure(self) -> tuple[str, str] | None:
        """``("source" | "target", what librdkafka said)`` when a cluster refused to authenticate an
        admin client of this flow; None otherwise.

        A report is confirmed before it is believed: it is forgotten and the cluster asked again, so a
        passing refusal (a token endpoint briefly away) does not make every later failure terminal.
        """
        self._admins.poll()  # librdkafka hands errors to error_cb only when polled
        failures = self._admins.authentication_failures
        for side in [s for s in ("source", "target") if s in failures]:
            failures.pop(side, None)
            admin = self.source_admin if side == "source" else self.target_admin
            try:
                admin.list_topics(timeout=5)
            except Exception:  # noqa: BLE001 - refused again, or away: error_cb tells which
                pass
            self._admins.poll()
            if side in failures:
                return side, failures[side]
        return None

    def close(self) -> None:
        """Let go of the admin clients, when the flow's work is over (made again if asked for)."""
        self._admins.close()

    def __repr__(self) -> str:
        return f"FlowClients({self.flow.name})"
