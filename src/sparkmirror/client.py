"""The application API: what Kafka's ``RemoteClusterUtils`` and ``MirrorClient`` answer, in Python.

An application that fails over from cluster A to cluster B asks B where its consumer
group should resume (:func:`translate_offsets`), and which clusters replicate into B and
how far away they are (:func:`upstream_clusters`, :func:`replication_hops`,
:func:`heartbeat_topics`, :func:`checkpoint_topics`). The answers are MM2's: the same
topic names, the same checkpoint records (``<source>.checkpoints.internal`` on the target),
so this module works against clusters mirrored by sparkmirror or by MirrorMaker 2. It needs
confluent-kafka only (no Spark, no JVM), and imports it lazily: importing this module is cheap.

Unlike Kafka's client, a lookup does not re-read the whole checkpoints topic. A
:class:`MirrorClient` keeps an index of the latest checkpoint per (group, topic, partition)
and tails the topic: the first lookup reads it from the start to its end; each later
lookup asks for the current end offset (one request) and reads only what was appended
since. Answers are therefore as fresh as the topic, and a lookup among 1,000 groups costs
about one round trip to the broker (``bench/client_lookup.py``). The module-level
functions share one cached client per cluster, configuration and policy::

    >>> from sparkmirror import client
    >>> client.translate_offsets("b1:9092", "A", "orders-app")          # doctest: +SKIP
    {TopicPartition(topic='A.orders', partition=0): 1200, TopicPartition(topic='A.orders', partition=1): 1187}
    >>> client.replication_hops("b1:9092", "A"), client.upstream_clusters("b1:9092")   # doctest: +SKIP
    (1, {'A'})

Where it differs from Kafka's client, on purpose: a tombstone in the checkpoints topic
deletes its key (Kafka's client fails with a NullPointerException); the topic is read
``read_committed`` (checkpoints are not written in transactions, so this changes nothing
today but would keep aborted ones out); a missing checkpoints topic or a lookup that cannot
reach the end of the topic in time raises (Kafka's client times out or returns what it read
so far). Like Kafka's client, only partition 0 of the checkpoints topic is read.

Configuration values may be secrets: they are never logged and never appear in an error.
"""

from __future__ import annotations

import atexit
import logging
import re
import threading
import time
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from sparkmirror.config.model import ClusterConfig
from sparkmirror.core.formats import Checkpoint
from sparkmirror.core.mirrorclient import (
    CheckpointIndex,
    TopicPartition,
    checkpoint_topics_in,
    heartbeat_topics_in,
    remote_topics_in,
    replication_hops_in,
    resolve_policy,
    upstream_clusters_in,
)
from sparkmirror.core.policy import ReplicationPolicy
from sparkmirror.errors import ConfigError, SparkMirrorError
from sparkmirror.kafka.flowclients import ClusterClients

__all__ = [
    "CheckpointsTopicNotFoundError",
    "ClientError",
    "LookupTimeoutError",
    "MirrorClient",
    "TopicPartition",
    "checkpoint_topics",
    "clear_cache",
    "client_for",
    "heartbeat_topics",
    "replication_hops",
    "translate_offsets",
    "upstream_clusters",
]

log = logging.getLogger(__name__)

#: Seconds a call may take unless told otherwise (Kafka's client takes the caller's timeout).
DEFAULT_TIMEOUT_S = 30.0

PolicyArg = str | ReplicationPolicy | None


class ClientError(SparkMirrorError):
    """The cluster could not answer: unreachable, refused the request, or the client was closed."""

    retriable = True


class CheckpointsTopicNotFoundError(ClientError):
    """The checkpoints topic of the source alias does not exist on the cluster.

    Usually a wrong alias or bootstrap, or a mirror that has not run yet.
    """

    retriable = False


class LookupTimeoutError(ClientError):
    """The checkpoints topic could not be read to its end in time. The index keeps what it
    read, so the next lookup continues from there."""

    retriable = True


# -- client configuration ---------------------------------------------------------------------

#: What the checkpoint reader needs, whatever the application configured.
_READER_FIXED = {
    "enable.auto.commit": "false",
    "enable.auto.offset.store": "false",
    "enable.partition.eof": "true",
    "auto.offset.reset": "earliest",
    "isolation.level": "read_committed",
}
#: Defaults the application may override (the group is never joined nor committed to).
_READER_DEFAULTS = {"group.id": "sparkmirror-reader-client", "client.id": "sparkmirror-client"}

_PROPERTY = re.compile(r'(?:property|Configuration property)[:\s]+"([^"]+)"')


def _plain(value: Any) -> str:
    getter = getattr(value, "get_secret_value", None)
    return str(getter() if getter else value)


def _split_roles(props: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Common, ``consumer.``-only and ``admin.``-only properties (RemoteClusterUtils' sub-configs)."""
    common: dict[str, Any] = {}
    consumer: dict[str, Any] = {}
    admin: dict[str, Any] = {}
    for key, value in props.items():
        if key.startswith("consumer."):
            consumer[key[len("consumer.") :]] = value
        elif key.startswith("admin."):
            admin[key[len("admin.") :]] = value
        else:
            common[key] = value
    return common, consumer, admin


def _error_text(exc: BaseException) -> str:
    first: Any = exc.args[0] if exc.args else None
    return str(first.str()) if hasattr(first, "str") else str(exc)


def _kafka_text(exc: BaseException) -> str:
    """librdkafka's message for a runtime error (it names brokers and codes, not config values)."""
    text = _error_text(exc)
    return text.splitlines()[0][:300] if text else type(exc).__name__


def _refused_config(exc: BaseException, role: str) -> ConfigError:
    """A ConfigError for a configuration librdkafka refused, naming only the property: the
    library's message can quote the value, which may be a secret."""
    text = _error_text(exc)
    m = _PROPERTY.search(text)
    if m is None:
        return ConfigError(f"the {role} configuration was refused by the Kafka client (librdkafka)")
    kind = "is unknown to" if "No such" in text else "has a value not accepted by"
    return ConfigError(f"{role} property {m.group(1)!r} {kind} the Kafka client (librdkafka)", key=m.group(1))


# -- the checkpoints of one source alias --------------------------------------------------------


class _CheckpointTail:
    """The index of one checkpoints topic and the consumer that keeps it up to date."""

    def __init__(self, topic: str, consumer_conf: dict[str, str], bootstrap: str) -> None:
        self.topic = topic
        self.bootstrap = bootstrap
        self.index = CheckpointIndex()
        #: The next offset of partition 0 to fold into the index.
        self.next_offset = 0
        self.lock = threading.Lock()
        self._conf = consumer_conf
        self._consumer: Any = None
        self._closed = False

    def _open(self, timeout_s: float) -> Any:
        from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        from sparkmirror.kafka.factory import new_consumer

        try:
            consumer = new_consumer(self._conf)
        except (KafkaException, ValueError, TypeError) as exc:
            raise _refused_config(exc, "consumer") from None
        try:
            md = consumer.list_topics(self.topic, timeout=max(timeout_s, 0.1))
        except KafkaException as exc:
            consumer.close()
            raise ClientError(
                f"cannot read the metadata of {self.topic} on {self.bootstrap}: {_kafka_text(exc)}"
            ) from None
        tmd = md.topics.get(self.topic)
        if tmd is None or (tmd.error is not None and tmd.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            consumer.close()
            raise CheckpointsTopicNotFoundError(
                f"no checkpoints topic {self.topic} on {self.bootstrap}: is the source alias right, and has a "
                "mirror with checkpoints enabled run into this cluster?"
            )
        if tmd.error is not None:
            consumer.close()
            raise ClientError(f"cannot read {self.topic} on {self.bootstrap}: {tmd.error.str()}")
        consumer.assign([KafkaTopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        self._consumer = consumer
        return consumer

    def end_offset(self, admin: Any, timeout_s: float) -> int:
        """The partition's end for a ``read_committed`` reader (the last stable offset), in one request.

        Asked through the admin client, not the consumer: the consumer's connection may hold a
        fetch that waits on the broker for new records (``fetch.wait.max.ms``), and a request
        sent behind it would wait as long.
        """
        from confluent_kafka import IsolationLevel, KafkaException
        from confluent_kafka import TopicPartition as KafkaTopicPartition
        from confluent_kafka.admin import OffsetSpec

        tp = KafkaTopicPartition(self.topic, 0)
        try:
            futures = admin.list_offsets(
                {tp: OffsetSpec.latest()},
                isolation_level=IsolationLevel.READ_COMMITTED,
                request_timeout=max(timeout_s, 0.1),
            )
            return int(futures[tp].result().offset)
        except KafkaException as exc:
            raise ClientError(
                f"cannot read the end offset of {self.topic}[0] on {self.bootstrap}: {_kafka_text(exc)}"
            ) from None

    def refresh(self, admin: Any, timeout_s: float) -> None:
        """Fold into the index every record up to the partition's current end. Hold :attr:`lock`."""
        from confluent_kafka import OFFSET_BEGINNING, KafkaError
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        if self._closed:
            raise ClientError(f"the client of {self.topic} on {self.bootstrap} is closed")
        deadline = time.monotonic() + timeout_s
        started, read_before = time.monotonic(), self.index.records_read
        consumer = self._consumer if self._consumer is not None else self._open(timeout_s)
        tp = KafkaTopicPartition(self.topic, 0)
        end = self.end_offset(admin, max(deadline - time.monotonic(), 0.1))
        if end < self.next_offset:
            log.warning(
                "%s[0] ends at offset %d, before offset %d already read: the topic was recreated; reading it again",
                self.topic,
                end,
                self.next_offset,
            )
            self.index.clear()
            self.next_offset = 0
            consumer.assign([KafkaTopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        while self.next_offset < end:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LookupTimeoutError(
                    f"{self.topic}[0] on {self.bootstrap}: read to offset {self.next_offset} of {end} "
                    f"in {timeout_s:.1f}s; the next lookup continues from there"
                )
            # consume() waits its whole timeout unless the batch fills: take what is queued
            # without waiting, and wait (poll) only when nothing is, which returns on the first record.
            msgs = consumer.consume(10_000, 0)
            if not msgs:
                msg = consumer.poll(min(remaining, 0.5))
                msgs = [] if msg is None else [msg]
            for msg in msgs:
                err = msg.error()
                if err is None:
                    self.index.apply(msg.key(), msg.value())
                    self.next_offset = msg.offset() + 1
                elif err.code() == KafkaError._PARTITION_EOF:
                    # The position at the end, past transaction markers that are never delivered.
                    self.next_offset = max(self.next_offset, msg.offset() or 0)
                elif err.fatal() or not (
                    err.retriable() or err.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)
                ):
                    raise ClientError(f"reading {self.topic}[0] on {self.bootstrap}: {err.str()}")
            if not msgs:
                pos = consumer.position([tp])[0].offset
                if pos is not None and pos > self.next_offset:
                    self.next_offset = pos
        read = self.index.records_read - read_before
        if read:
            log.debug(
                "%s[0]: %d new records to offset %d in %.3fs (%d checkpoints of %d groups indexed)",
                self.topic,
                read,
                self.next_offset,
                time.monotonic() - started,
                len(self.index),
                len(self.index.groups()),
            )

    def close(self) -> None:
        self._closed = True
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


# -- the client -------------------------------------------------------------------------------------


class MirrorClient:
    """MM2's ``MirrorClient`` for one cluster, with an index of each checkpoints topic it reads.

    ``bootstrap`` is the cluster to ask (the target, for translations). ``config`` holds extra
    client properties in the Java client's names or librdkafka's (``security.protocol``,
    ``sasl.jaas.config`` with the Plain or Scram login module, ``ssl.truststore.location`` of a
    PEM file, ...), translated as everywhere in sparkmirror; keys prefixed ``consumer.`` or
    ``admin.`` go to that client only, as with ``RemoteClusterUtils``; the replication policy's
    keys (``replication.policy.class``, ``replication.policy.separator``,
    ``replication.policy.internal.topic.separator.enabled``) choose the policy, unless the
    keyword arguments do. ``timeout_s`` is the default time one call may take.

    Thread-safe: lookups of one source alias are serialised, others run side by side.
    Close it (or use it as a context manager) to release its Kafka clients::

        >>> with MirrorClient("b1:9092") as mc:                            # doctest: +SKIP
        ...     mc.translate_offsets("A", "orders-app")
        ...     mc.translate_offsets("A", "billing")    # reads only checkpoints appended since
        {TopicPartition(topic='A.orders', partition=0): 1200}
        {TopicPartition(topic='A.invoices', partition=0): 310}
    """

    def __init__(
        self,
        bootstrap: str,
        *,
        config: Mapping[str, Any] | None = None,
        replication_policy: PolicyArg = None,
        separator: str | None = None,
        internal_topic_separator_enabled: bool | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        policy, props = resolve_policy(config, replication_policy, separator, internal_topic_separator_enabled)
        common, consumer_only, admin_only = _split_roles(props)
        java = {**common, "bootstrap.servers": bootstrap}
        # The same settings builder as the run, translate and failover (secrets kept as SecretStr
        # in the model, revealed only into the client settings).
        cluster = ClusterClients(
            ClusterConfig(
                alias=bootstrap,
                bootstrap_servers=bootstrap,
                client_props=java,
                consumer_props={**java, **consumer_only},
                admin_props={**java, **admin_only},
            )
        )
        self.bootstrap = bootstrap
        self.policy: ReplicationPolicy = policy
        self.timeout_s = timeout_s
        self._consumer_conf = {**_READER_DEFAULTS, **cluster.consumer, **_READER_FIXED}
        self._admin_conf = cluster.admin_config
        self._tails: dict[str, _CheckpointTail] = {}
        self._admin: Any = None
        self._lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:  # never the configuration: it may hold secrets
        return f"MirrorClient(bootstrap={self.bootstrap!r}, policy={self.policy!r})"

    # -- checkpoints ----------------------------------------------------------------------------

    def _tail(self, source_alias: str) -> _CheckpointTail:
        with self._lock:
            if self._closed:
                raise ClientError(f"{self!r} is closed")
            tail = self._tails.get(source_alias)
            if tail is None:
                topic = self.policy.checkpoints_topic(source_alias)
                tail = _CheckpointTail(topic, self._consumer_conf, self.bootstrap)
                self._tails[source_alias] = tail
            return tail

    def checkpoints(
        self, source_alias: str, group: str, *, timeout_s: float | None = None
    ) -> dict[TopicPartition, Checkpoint]:
        """The latest checkpoint of each topic partition of ``group`` from ``source_alias``, read up to
        the current end of the checkpoints topic. Keys name the topic as the checkpoint does (the
        remote topic here, ``A.orders``); values carry the upstream offset and the metadata too."""
        tail = self._tail(source_alias)
        with tail.lock:
            tail.refresh(self._admin_client(), self.timeout_s if timeout_s is None else timeout_s)
            return tail.index.checkpoints(group)

    def translate_offsets(
        self, source_alias: str, group: str, *, timeout_s: float | None = None
    ) -> dict[TopicPartition, int]:
        """Where ``group`` of cluster ``source_alias`` resumes here: ``RemoteClusterUtils.translateOffsets``.

        The downstream offset of the latest checkpoint per topic partition, keyed as the
        checkpoints name them (the remote topic on this cluster). Empty when the group has no
        checkpoints. Raises :class:`CheckpointsTopicNotFoundError` when the source alias has no
        checkpoints topic here, :class:`LookupTimeoutError` when the topic's end was not reached
        in ``timeout_s``.

        >>> mc.translate_offsets("A", "orders-app")                            # doctest: +SKIP
        {TopicPartition(topic='A.orders', partition=0): 1200}
        """
        tail = self._tail(source_alias)
        with tail.lock:
            tail.refresh(self._admin_client(), self.timeout_s if timeout_s is None else timeout_s)
            return tail.index.offsets(group)

    def groups(self, source_alias: str, *, timeout_s: float | None = None) -> set[str]:
        """Groups of ``source_alias`` that have checkpoints here."""
        tail = self._tail(source_alias)
        with tail.lock:
            tail.refresh(self._admin_client(), self.timeout_s if timeout_s is None else timeout_s)
            return tail.index.groups()

    def index(self, source_alias: str) -> CheckpointIndex:
        """The live index of ``source_alias``'s checkpoints, as last refreshed (for inspection and
        tests: ``records_read`` counts the records folded into it)."""
        return self._tail(source_alias).index

    def _admin_client(self) -> Any:
        from confluent_kafka import KafkaException

        from sparkmirror.kafka.factory import new_admin

        with self._lock:
            if self._closed:
                raise ClientError(f"{self!r} is closed")
            if self._admin is None:
                try:
                    self._admin = new_admin(dict(self._admin_conf))
                except (KafkaException, ValueError, TypeError) as exc:
                    raise _refused_config(exc, "admin") from None
            return self._admin

    # -- topic names ----------------------------------------------------------------------------

    def topics(self, *, timeout_s: float | None = None) -> set[str]:
        """Names of the cluster's topics (Kafka's own ``__`` topics excluded, as its client lists them)."""
        from confluent_kafka import KafkaException

        admin = self._admin_client()
        try:
            md = admin.list_topics(timeout=self.timeout_s if timeout_s is None else timeout_s)
        except KafkaException as exc:
            raise ClientError(f"cannot list the topics of {self.bootstrap}: {_kafka_text(exc)}") from None
        return {name for name, t in md.topics.items() if t.error is None and name not in _KAFKA_INTERNAL}

    def heartbeat_topics(self, *, timeout_s: float | None = None) -> set[str]:
        """Heartbeat topics here: ``heartbeats`` and the remote copies (``A.heartbeats``, ``B.A.heartbeats``)."""
        return heartbeat_topics_in(self.topics(timeout_s=timeout_s), self.policy)

    def checkpoint_topics(self, *, timeout_s: float | None = None) -> set[str]:
        """Checkpoint topics here (``<alias>.checkpoints.internal``), one per source that checkpoints here."""
        return checkpoint_topics_in(self.topics(timeout_s=timeout_s), self.policy)

    def upstream_clusters(self, *, timeout_s: float | None = None) -> set[str]:
        """Clusters that replicate here, directly or over several hops, as the heartbeat topics show."""
        return upstream_clusters_in(self.topics(timeout_s=timeout_s), self.policy)

    def replication_hops(self, upstream_alias: str, *, timeout_s: float | None = None) -> int:
        """Fewest replication hops from cluster ``upstream_alias`` to here; -1 when unreachable."""
        return replication_hops_in(self.topics(timeout_s=timeout_s), upstream_alias, self.policy)

    def remote_topics(self, source: str | None = None, *, timeout_s: float | None = None) -> set[str]:
        """Topics replicated here (from ``source`` only, when given); internal topics excluded."""
        return remote_topics_in(self.topics(timeout_s=timeout_s), self.policy, source)

    # -- life cycle -------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the Kafka clients and forget the indexes. Calling it again does nothing."""
        with self._lock:
            self._closed = True
            tails, self._tails = list(self._tails.values()), {}
            self._admin = None  # AdminClient has no close(); dropping it releases it
        for tail in tails:
            with tail.lock:
                tail.close()

    def __enter__(self) -> MirrorClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


_KAFKA_INTERNAL = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


# -- module-level functions (a cached client per cluster) -----------------------------------------

_cache: dict[tuple[Any, ...], MirrorClient] = {}
_cache_lock = threading.Lock()
_atexit_registered = False


def _policy_key(policy: ReplicationPolicy) -> Any:
    try:
        hash(policy)
    except TypeError:
        return ("id", id(policy))
    return policy


def client_for(
    bootstrap: str,
    *,
    config: Mapping[str, Any] | None = None,
    replication_policy: PolicyArg = None,
    separator: str | None = None,
    internal_topic_separator_enabled: bool | None = None,
) -> MirrorClient:
    """The cached :class:`MirrorClient` for this cluster, configuration and policy (made on first use).

    The module-level functions use it, so repeated lookups read only new checkpoints.
    :func:`clear_cache` closes and drops every cached client.
    """
    global _atexit_registered
    policy, props = resolve_policy(config, replication_policy, separator, internal_topic_separator_enabled)
    key = (bootstrap, _policy_key(policy), tuple(sorted((str(k), _plain(v)) for k, v in props.items())))
    with _cache_lock:
        cached = _cache.get(key)
        if cached is None:
            cached = MirrorClient(bootstrap, config=props, replication_policy=policy)
            _cache[key] = cached
            if not _atexit_registered:
                atexit.register(clear_cache)
                _atexit_registered = True
        return cached


def clear_cache() -> None:
    """Close and drop the clients cached by the module-level functions."""
    with _cache_lock:
        clients = list(_cache.values())
        _cache.clear()
    for c in clients:
        c.close()


def translate_offsets(
    target_bootstrap: str,
    source_alias: str,
    group: str,
    *,
    config: Mapping[str, Any] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    replication_policy: PolicyArg = None,
    separator: str | None = None,
    internal_topic_separator_enabled: bool | None = None,
) -> dict[TopicPartition, int]:
    """``RemoteClusterUtils.translateOffsets``: where ``group`` of cluster ``source_alias`` resumes on the target.

    Reads ``<source_alias>.checkpoints.internal`` on ``target_bootstrap`` (the name follows the
    replication policy: ``replication_policy`` ``"default"`` or ``"identity"`` or Kafka's class
    names, ``separator``, ``internal_topic_separator_enabled``; None means the matching key of
    ``config``, else MM2's default). Returns the downstream offset of the group's latest
    checkpoint per topic partition, keyed as the checkpoints name them (``A.orders``: the
    remote topic on the target). ``config`` holds extra client properties (security, ...).
    Repeated calls reuse a cached client and read only checkpoints appended since the last.

    >>> from sparkmirror.client import translate_offsets
    >>> offsets = translate_offsets("b1:9092", "A", "orders-app", config={     # doctest: +SKIP
    ...     "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
    ...     "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
    ...                         'username="app" password="…";'})
    >>> from confluent_kafka import Consumer, TopicPartition as KafkaTopicPartition    # doctest: +SKIP
    >>> consumer = Consumer({"bootstrap.servers": "b1:9092", "group.id": "orders-app"})  # doctest: +SKIP
    >>> consumer.assign([KafkaTopicPartition(tp.topic, tp.partition, off)            # doctest: +SKIP
    ...                  for tp, off in offsets.items()])
    """
    mc = client_for(
        target_bootstrap,
        config=config,
        replication_policy=replication_policy,
        separator=separator,
        internal_topic_separator_enabled=internal_topic_separator_enabled,
    )
    return mc.translate_offsets(source_alias, group, timeout_s=timeout_s)


def replication_hops(
    bootstrap: str,
    source_alias: str,
    *,
    config: Mapping[str, Any] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    replication_policy: PolicyArg = None,
    separator: str | None = None,
    internal_topic_separator_enabled: bool | None = None,
) -> int:
    """``RemoteClusterUtils.replicationHops``: fewest hops from ``source_alias`` to ``bootstrap``'s cluster, by
    its heartbeat topics (``A.heartbeats``: 1 from A; ``B.A.heartbeats``: 2 from A); -1 if unreachable.

    >>> replication_hops("c1:9092", "A")                                       # doctest: +SKIP
    2
    """
    mc = client_for(
        bootstrap,
        config=config,
        replication_policy=replication_policy,
        separator=separator,
        internal_topic_separator_enabled=internal_topic_separator_enabled,
    )
    return mc.replication_hops(source_alias, timeout_s=timeout_s)


def upstream_clusters(
    bootstrap: str,
    *,
    config: Mapping[str, Any] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    replication_policy: PolicyArg = None,
    separator: str | None = None,
    internal_topic_separator_enabled: bool | None = None,
) -> set[str]:
    """``RemoteClusterUtils.upstreamClusters``: every cluster that replicates into ``bootstrap``'s, over any
    number of hops, read from its heartbeat topics.

    >>> upstream_clusters("c1:9092")                                           # doctest: +SKIP
    {'A', 'B'}
    """
    mc = client_for(
        bootstrap,
        config=config,
        replication_policy=replication_policy,
        separator=separator,
        internal_topic_separator_enabled=internal_topic_separator_enabled,
    )
    return mc.upstream_clusters(timeout_s=timeout_s)


def heartbeat_topics(
    bootstrap: str,
    *,
    config: Mapping[str, Any] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    replication_policy: PolicyArg = None,
    separator: str | None = None,
    internal_topic_separator_enabled: bool | None = None,
) -> set[str]:
    """``RemoteClusterUtils.heartbeatTopics``: ``heartbeats`` and its remote copies on ``bootstrap``'s cluster.

    >>> heartbeat_topics("c1:9092")                                            # doctest: +SKIP
    {'heartbeats', 'B.heartbeats', 'B.A.heartbeats'}
    """
    mc = client_for(
        bootstrap,
        config=config,
        replication_policy=replication_policy,
        separator=separator,
        internal_topic_separator_enabled=internal_topic_separator_enabled,
    )
    return mc.heartbeat_topics(timeout_s=timeout_s)


def checkpoint_topics(
    bootstrap: str,
    *,
    config: Mapping[str, Any] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    replication_policy: PolicyArg = None,
    separator: str | None = None,
    internal_topic_separator_enabled: bool | None = None,
) -> set[str]:
    """``RemoteClusterUtils.checkpointTopics``: the checkpoints topics on ``bootstrap``'s cluster.

    >>> checkpoint_topics("b1:9092")                                           # doctest: +SKIP
    {'A.checkpoints.internal'}
    """
    mc = client_for(
        bootstrap,
        config=config,
        replication_policy=replication_policy,
        separator=separator,
        internal_topic_separator_enabled=internal_topic_separator_enabled,
    )
    return mc.checkpoint_topics(timeout_s=timeout_s)
