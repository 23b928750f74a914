"""The typed, frozen configuration model: clusters, replication flows and Spark settings.

Field defaults equal MM2's (Kafka 4.x) where the key is MM2's; each field's alias is the
key in ``mm2.properties``. Client properties are kept in Java's dotted form, ready for the
Kafka clients; values whose key names a credential are held as :class:`SecretStr` and are
never shown in a repr, a str, an error or a log (``"[hidden]"`` unless asked for).
The model never reads files; :mod:`sparkmirror.config.loader` builds it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator, model_validator

from sparkmirror.core.filters import (
    DEFAULT_CONFIG_PROPERTIES_EXCLUDE,
    DEFAULT_GROUPS_EXCLUDE,
    DEFAULT_GROUPS_INCLUDE,
    DEFAULT_TOPICS_EXCLUDE,
    DEFAULT_TOPICS_INCLUDE,
    ConfigPropertyFilter,
    GroupFilter,
    TopicFilter,
)
from sparkmirror.core.policy import DEFAULT_POLICY_CLASS, ReplicationPolicy, policy_from_name, should_replicate_topic

__all__ = [
    "HIDDEN",
    "ClientProps",
    "ClusterConfig",
    "FlowConfig",
    "MirrorConfig",
    "SparkSettings",
    "is_secret_key",
    "reveal",
]

#: What a secret value is replaced by when secrets are not revealed.
HIDDEN = "[hidden]"

#: Client properties in Java's dotted form; secret values are SecretStr.
ClientProps = Mapping[str, str | SecretStr]

# A key is secret when it names a credential: passwords and passphrases, anything "secret",
# JAAS configs (they embed passwords), Schema Registry's basic.auth.user.info, private keys
# (ssl.keystore.key, ssl.key.pem, *.private.key*), cloud storage keys (fs.s3a.access.key, Azure's
# fs.azure.account.key.<account>...), SASL/OAUTHBEARER settings that embed credentials
# (sasl.oauthbearer.config), and tokens/credentials given inline.
_SECRET_KEY = re.compile(
    r"password|passphrase|secret|jaas\.config|user\.info|private\.key|account\.key|(^|\.)key$|key\.pem$|"
    r"oauthbearer\.config$|token$|credentials?$",
    re.IGNORECASE,
)


def is_secret_key(key: str) -> bool:
    """True when the value of config ``key`` is a credential and must never be printed."""
    return _SECRET_KEY.search(key) is not None


def _protect(props: Mapping[str, Any]) -> dict[str, str | SecretStr]:
    out: dict[str, str | SecretStr] = {}
    for key, value in props.items():
        if isinstance(value, SecretStr):
            out[key] = value
        elif is_secret_key(key):
            out[key] = SecretStr(str(value))
        else:
            out[key] = str(value)
    return out


def reveal(props: ClientProps, reveal_secrets: bool = False) -> dict[str, str]:
    """Plain strings from ``props``: secrets as ``"[hidden]"`` unless ``reveal_secrets``."""
    out: dict[str, str] = {}
    for key, value in props.items():
        if isinstance(value, SecretStr):
            out[key] = value.get_secret_value() if reveal_secrets else HIDDEN
        else:
            out[key] = value
    return out


#: Keys of the retired micro-batch engine: a file that still sets one loads (they tuned nothing that
#: changes what is copied), and one warning names them with the reason.
RETIRED_KEYS = {
    "sparkmirror.trigger.interval.ms": "the micro-batch trigger; the streaming engine copies each record as it arrives",
    "sparkmirror.task.max.records": "micro-batch rounds; the streaming engine's flows share the cores by their tasks",
    "sparkmirror.checkpoint.location": "Spark's checkpoint; the streaming engine keeps its progress on the target only",
}


#: Values of the retired copy paths: a file that still asks for one is refused with the reason (what it
#: asked for would no longer happen). Field -> (the retired value, why and what to do).
RETIRED_VALUES = {
    "writer": (
        "jvm",
        "the JVM writer was retired: the streaming engine copies with the Python writer at MM2's latency "
        'and above the JVM writer\'s throughput (docs/decisions.md, "The JVM writer"); remove the key',
    ),
    "engine": (
        "batch",
        "the micro-batch engine was retired: the streaming engine copies at MM2's latency with every "
        'guarantee of the micro-batches (docs/decisions.md, "The micro-batch engine, retired"); remove '
        "the key",
    ),
    "source_reader": (
        "spark",
        "Spark's Kafka reader ran on the retired micro-batch engine only; the streaming engine reads "
        "with librdkafka, which takes the source's TLS and SASL settings (JKS stores converted, "
        'docs/security.md; docs/decisions.md, "The micro-batch engine, retired"); remove the key',
    ),
}


class _Frozen(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        populate_by_name=True,
        use_attribute_docstrings=True,
        arbitrary_types_allowed=True,
    )


class ClusterConfig(_Frozen):
    """One Kafka cluster named in ``clusters``, with its client properties resolved.

    The role dicts hold everything that applies to any client of that role talking to this
    cluster: top-level client keys, top-level ``consumer.*``/``producer.*``/``admin.*``,
    then ``<alias>.<client key>`` and ``<alias>.consumer.*`` etc. (see the loader).
    """

    alias: str
    """The cluster's alias, as listed in ``clusters``."""
    bootstrap_servers: str = ""
    """``<alias>.bootstrap.servers``; empty only for a cluster that no enabled flow uses."""
    client_props: ClientProps = Field(default_factory=dict)
    """Connection properties shared by all clients (``bootstrap.servers``, ``security.protocol``, ``ssl.*``,
    ``sasl.*``)."""
    consumer_props: ClientProps = Field(default_factory=dict)
    """Resolved properties for a consumer of this cluster."""
    producer_props: ClientProps = Field(default_factory=dict)
    """Resolved properties for a producer to this cluster."""
    admin_props: ClientProps = Field(default_factory=dict)
    """Resolved properties for an admin client of this cluster."""

    @field_validator("client_props", "consumer_props", "producer_props", "admin_props", mode="before")
    @classmethod
    def _hide_secrets(cls, value: Mapping[str, Any]) -> ClientProps:
        return _protect(value)


#: ``sparkmirror.commit.interval.ms`` unset, at least once: a record is copied as it arrives whatever the
#: interval, and 1 s measured faster and cheaper than 200 ms at 1,000 partitions (docs/performance.md,
#: "The commit interval at 1,000 partitions"); a crash copies again at most this much.
AT_LEAST_ONCE_COMMIT_INTERVAL_MS = 1000
#: Exactly once: readers with ``read_committed`` see a record at its interval's commit.
EXACTLY_ONCE_COMMIT_INTERVAL_MS = 200


class SparkSettings(_Frozen):
    """sparkmirror's own keys for the Spark job; global, overridable per flow as ``A->B.sparkmirror.…``."""

    master: str = Field(default="local[*]", alias="sparkmirror.spark.master")
    """Spark master URL (``local[*]`` runs Spark inside the sparkmirror process)."""
    conf: ClientProps = Field(default_factory=dict, alias="sparkmirror.spark.conf")
    """Extra Spark configuration, from ``sparkmirror.spark.conf.<spark key> = value``."""
    engine: Literal["batch", "streaming"] = Field(default="streaming", alias="sparkmirror.engine")
    """How the copy runs on Spark: ``streaming``, the only engine: long-running Spark tasks, each owning a
    set of source partitions with one consumer and one producer (one per
    ``sparkmirror.partitions.per.producer`` partitions of a large task), copying every record as it arrives and
    making progress durable on the target every ``sparkmirror.commit.interval.ms`` (the latency of MM2;
    docs/decisions.md, "The streaming engine"). ``batch`` (Structured Streaming micro-batches) was retired
    (issue 27; docs/decisions.md, "The micro-batch engine, retired") and is refused with the reason."""
    commit_interval_ms: int | None = Field(default=None, ge=10, le=600_000, alias="sparkmirror.commit.interval.ms")
    """Streaming engine: how often each task makes its progress durable on the target (offset-map
    segments and each partition's next source offset; exactly-once: one transaction per transaction
    group). At least once, a crash copies at most this much again; exactly once, readers on the target
    see records this much later. Unset: :data:`AT_LEAST_ONCE_COMMIT_INTERVAL_MS` or
    :data:`EXACTLY_ONCE_COMMIT_INTERVAL_MS` by the flow's mode (:attr:`FlowConfig.commit_interval_ms`;
    docs/decisions.md, "The commit interval by mode")."""
    throttle_bytes_per_second: int | None = Field(default=None, ge=1, alias="sparkmirror.throttle.bytes.per.second")
    """Streaming engine: most key and value bytes per second a flow copies, across all its tasks wherever
    they run (unset: no limit). Top level: each flow's limit; ``A->B.``: that flow's. A target cluster's
    key ``B.sparkmirror.throttle.bytes.per.second`` caps all the flows into B of one process together.
    ``sparkmirror throttle`` changes a running flow's limit without a restart; checkpoints, heartbeats and
    status are never throttled. docs/operations.md, "Flow control"."""
    report_port: int = Field(default=0, ge=0, le=65535, alias="sparkmirror.report.port")
    """Global, streaming engine: the driver's port its tasks report to every commit interval (0: any
    free port). On Kubernetes, a fixed port the driver's Service exposes, as ``spark.driver.port``."""
    partitions_per_producer: int = Field(default=16, ge=1, alias="sparkmirror.partitions.per.producer")
    """Streaming engine, at least once: a task writes with one producer per this many of its source
    partitions (at most 32). librdkafka sends one partition per produce request, at most 5 at a time
    on a connection, so a producer writing hundreds of partitions at a low rate queues each record
    behind the other partitions' requests; more producers are more connections to the target
    (docs/performance.md, "Latency at 1,000 partitions"). Exactly once, each transaction group is a
    producer (``sparkmirror.exactly.once.transactions``)."""
    producer_idle_close_ms: int = Field(default=30_000, ge=0, alias="sparkmirror.producer.idle.close.ms")
    """Streaming engine: a task closes a producer none of whose partitions had a record for this long (at
    least once not its first, which writes the offset map; exactly once a transaction group's, with no
    transaction open), and makes it again at their next record, which then waits for a new producer id
    (exactly once also for its ``init_transactions`` and a look at the target: the layout on record and
    the group's progress must be as the task left them, docs/faults.md) (0: never close). Idle producers
    were most of an idle flow's CPU at 1,000 partitions (docs/performance.md, "An idle flow of 1,000
    partitions")."""
    batch_max_records: int = Field(default=2_000_000, ge=1, alias="sparkmirror.batch.max.records")
    """A copy task commits sooner than ``sparkmirror.commit.interval.ms`` once it has handed this many
    records to its producers since its last commit (at least once, half of it: two intervals may be
    unfinished at a crash), which bounds what a crash copies again (docs/faults.md)."""
    source_reader: Literal["direct", "spark"] = Field(default="direct", alias="sparkmirror.source.reader")
    """How records are read from the source: ``direct``, each streaming task's librdkafka consumer (the
    only reader). ``spark`` (Spark's Kafka source, Arrow and the Python worker) ran on the retired
    micro-batch engine only and is refused with the reason (docs/decisions.md)."""
    writer: Literal["python", "jvm"] = Field(default="python", alias="sparkmirror.writer")
    """Who copies the records: ``python``, the executors' Python workers with librdkafka (the only
    writer: every record rule is written once, in ``pipeline/executor/sink.py``). ``jvm`` was retired
    (issue 27; docs/decisions.md, "The JVM writer") and is refused with the reason."""

    transport: Literal["librdkafka", "java", "java-writes"] = Field(default="librdkafka", alias="sparkmirror.transport")
    """Streaming engine: the clients a copy task reads and writes with. ``librdkafka``
    (confluent-kafka in the task's Python worker) or ``java``: Kafka's Java clients in one JVM per
    executor, shared by its tasks, with every record still going through the task's Python and its
    record rules (``pipeline/transport``; needs Java 17 where tasks run, and a JDK once to compile it).
    The client settings (``A.consumer.*``, ``B.producer.*``) then reach the Java clients as written.
    ``java-writes``: librdkafka reads, the transport's Java producer writes (exactly once at many
    partitions: Java sends every partition of a broker in one request). docs/decisions.md, "Java
    clients as the task's transport"."""

    @field_validator("writer", "engine", "source_reader")
    @classmethod
    def _retired_value(cls, value: str, info: ValidationInfo) -> str:
        retired = RETIRED_VALUES[str(info.field_name)]
        if value == retired[0]:
            raise ValueError(retired[1])
        return value

    progress_interval_seconds: int = Field(default=10, ge=1, alias="sparkmirror.progress.interval.seconds")
    """How often progress is logged (piped output) and each flow's status is written to its target, in
    seconds; metrics' lag is refreshed as often."""
    metrics_port: int | None = Field(default=None, ge=1, le=65535, alias="sparkmirror.metrics.port")
    """Serve Prometheus metrics at ``http://<sparkmirror.metrics.host>:<port>/metrics`` while ``run`` runs
    (unset: no metrics endpoint). Process-wide: the top-level key counts. docs/operations.md lists them."""
    metrics_host: str = Field(default="0.0.0.0", alias="sparkmirror.metrics.host")
    """Address the metrics endpoint listens on (``0.0.0.0``: every interface)."""
    exactly_once: bool = Field(default=False, alias="sparkmirror.exactly.once")
    """Write each partition's records, offset-map segments and source position in one transaction on
    the target (same effect as MM2's ``exactly.once.source.support = enabled``)."""
    source_loss: Literal["report", "fail"] = Field(default="report", alias="sparkmirror.source.loss")
    """What a flow does when records expired on the source before they were mirrored (found before a
    copy job's tasks start, also after restarts): ``report`` logs topic, partition, offsets and count, counts
    them in the run's summary and exit code (5), and carries on; ``fail`` stops the flow before it
    copies past the gap (exit code 5). docs/faults.md."""
    adopt_mm2: bool = Field(default=True, alias="sparkmirror.adopt.mm2")
    """On a flow's first start (no progress of sparkmirror's on the target), resume each partition where
    MirrorMaker 2 stopped, from Connect's offsets topic on the target (``offset.storage.topic``;
    MM2's dedicated mode: ``mm2-offsets.<source>.internal``); false: never read it (a remote partition
    that holds records is then refused unless ``run --existing-records`` says what to do).
    docs/migrating-from-mm2.md."""
    sync_topic_deletions: bool = Field(default=False, alias="sparkmirror.sync.topic.deletions")
    """A source topic the flow mirrored is deleted (not re-created): false (default, as MM2) leaves its
    remote topic as it is; true deletes the remote topic on the target once every record of it was
    mirrored and no consumer group on the target reads it (checked every topic refresh). Either way
    the deletion is logged and counted (``sparkmirror_source_topic_deletions_total``). docs/faults.md."""
    startup_timeout_ms: int = Field(default=-1, ge=-1, alias="sparkmirror.startup.timeout.ms")
    """Global: how long ``run`` waits at start for a cluster that does not answer, saying at each attempt
    what it waits for (back-off 1 s to 10 s); -1 (default): for as long as it takes. A cluster lost
    later is waited for by the flow's restarts, without limit."""
    stop_on_flow_failure: bool = Field(default=False, alias="sparkmirror.stop.on.flow.failure")
    """Global: a flow's terminal error (a refused record, lost source records with ``source.loss = fail``,
    a re-created topic) stops every flow of the run; by default it stops that flow only and the run
    ends with that flow's error once the others are done."""
    exactly_once_transactions: int = Field(default=-1, ge=-1, le=10_000, alias="sparkmirror.exactly.once.transactions")
    """Exactly-once: how many transactional ids (transaction groups) a flow writes with; each source
    partition belongs to one group for good (a function of topic and partition) and each group commits
    one transaction per commit interval with all its partitions' records, offset-map segments and
    progress. -1 (default): twice the flow's copy tasks (its share of the cores) at the flow's start, or
    for a flow of many partitions one group per 64 of them, at most
    8 per task (each group is a producer; docs/performance.md, "Latency at 1,000 partitions"), counted
    when the flow starts (partitions added later count at its next start); 0: one id
    and one transaction per source partition (the only layout before). A change is safe: each start
    fences the ids of every layout that may still hold a transaction."""
    transaction_timeout_ms: int = Field(default=300_000, ge=1000, alias="sparkmirror.transaction.timeout.ms")
    """``transaction.timeout.ms`` of the exactly-once writer's producers; a task's transaction must
    commit within it (the broker's ``transaction.max.timeout.ms`` caps it, 15 minutes by default)."""

    @field_validator("conf", mode="before")
    @classmethod
    def _hide_secrets(cls, value: Mapping[str, Any]) -> ClientProps:
        return _protect(value)

    def spark_conf(self, reveal_secrets: bool = False) -> dict[str, str]:
        """The Spark configuration as plain strings (secrets hidden unless ``reveal_secrets``)."""
        return reveal(self.conf, reveal_secrets)


#: The five client roles of a flow, keyed as in :attr:`FlowConfig.clients`.
CLIENT_ROLES = ("source_consumer", "source_admin", "target_producer", "target_admin", "target_consumer")


class FlowConfig(_Frozen):
    """One replication flow ``source->target`` with MM2's settings after flow-level overrides."""

    source: str
    """Alias of the source cluster."""
    target: str
    """Alias of the target cluster."""
    source_cluster: ClusterConfig
    """The source cluster."""
    target_cluster: ClusterConfig
    """The target cluster."""
    enabled: bool = Field(default=False, alias="enabled")
    """``A->B.enabled``: the flow runs only when true (MM2 default: false)."""
    topics: tuple[str, ...] = Field(default=DEFAULT_TOPICS_INCLUDE, alias="topics")
    """Topic names or regexes to replicate (full match)."""
    topics_exclude: tuple[str, ...] = Field(default=DEFAULT_TOPICS_EXCLUDE, alias="topics.exclude")
    """Topic names or regexes never replicated (full match)."""
    groups: tuple[str, ...] = Field(default=DEFAULT_GROUPS_INCLUDE, alias="groups")
    """Consumer groups or regexes whose offsets are checkpointed (full match)."""
    groups_exclude: tuple[str, ...] = Field(default=DEFAULT_GROUPS_EXCLUDE, alias="groups.exclude")
    """Consumer groups or regexes never checkpointed (full match)."""
    replication_policy_class: str = Field(default=DEFAULT_POLICY_CLASS, alias="replication.policy.class")
    """Remote topic naming: Kafka's Default or Identity policy (class, simple name, default/identity)."""
    replication_policy_separator: str = Field(default=".", alias="replication.policy.separator")
    """Separator between source alias and topic in remote topic names."""
    replication_policy_internal_topic_separator_enabled: bool = Field(
        default=True, alias="replication.policy.internal.topic.separator.enabled"
    )
    """Whether the separator is also used in checkpoints and offset-syncs topic names."""
    mm2_offsets_topic: str = Field(default="", alias="offset.storage.topic")
    """Connect's offsets topic on the target where MirrorMaker 2 kept this flow's source offsets
    (``offset.storage.topic``, top level or for the target cluster as MM2 reads it; empty: MM2's
    dedicated-mode name ``mm2-offsets.<source>.internal``). ``run`` adopts MM2's position from it on
    a flow's first start; ``handback mm2`` writes sparkmirror's position there."""
    target_throttle_bytes_per_second: int | None = Field(default=None, ge=1)
    """``<target>.sparkmirror.throttle.bytes.per.second``: most key and value bytes per second all the
    flows into the target copy together in one process (each flow's own limit applies too)."""
    replication_factor: int = Field(default=2, alias="replication.factor")
    """Replication factor of newly created remote topics; -1 means the target broker's default."""
    refresh_topics_enabled: bool = Field(default=True, alias="refresh.topics.enabled")
    """Whether new source topics and partitions are looked for periodically."""
    refresh_topics_interval_seconds: int = Field(default=600, ge=1, alias="refresh.topics.interval.seconds")
    """How often to look for new source topics and partitions."""
    sync_topic_configs_enabled: bool = Field(default=True, alias="sync.topic.configs.enabled")
    """Whether topic configs are copied to remote topics."""
    sync_topic_configs_interval_seconds: int = Field(default=600, ge=1, alias="sync.topic.configs.interval.seconds")
    """How often topic configs are copied."""
    sync_topic_acls_enabled: bool = Field(default=True, alias="sync.topic.acls.enabled")
    """Whether topic ACLs of replicated topics are copied to the remote topics (MM2's rule:
    ALLOW WRITE never, ALLOW ALL as READ; ACLs on the target are only added, never deleted)."""
    sync_topic_acls_interval_seconds: int = Field(default=600, ge=1, alias="sync.topic.acls.interval.seconds")
    """How often topic ACLs are copied."""
    config_properties_exclude: tuple[str, ...] = Field(
        default=DEFAULT_CONFIG_PROPERTIES_EXCLUDE, alias="config.properties.exclude"
    )
    """Topic config names or regexes never copied."""
    heartbeats_replication_enabled: bool = Field(default=True, alias="heartbeats.replication.enabled")
    """Whether heartbeats topics are replicated even when ``topics`` does not select them."""
    emit_heartbeats_enabled: bool = Field(default=True, alias="emit.heartbeats.enabled")
    """Whether heartbeats are emitted for this flow."""
    emit_heartbeats_interval_seconds: int = Field(default=1, ge=1, alias="emit.heartbeats.interval.seconds")
    """Interval between heartbeats."""
    emit_checkpoints_enabled: bool = Field(default=True, alias="emit.checkpoints.enabled")
    """Whether consumer group checkpoints are emitted to ``<source>.checkpoints.internal``."""
    emit_checkpoints_interval_seconds: int = Field(default=60, ge=1, alias="emit.checkpoints.interval.seconds")
    """Interval between checkpoints."""
    sync_group_offsets_enabled: bool = Field(default=False, alias="sync.group.offsets.enabled")
    """Whether translated offsets are committed to (empty) groups on the target."""
    sync_group_offsets_interval_seconds: int = Field(default=60, ge=1, alias="sync.group.offsets.interval.seconds")
    """Interval between group offset syncs."""
    refresh_groups_enabled: bool = Field(default=True, alias="refresh.groups.enabled")
    """Whether new consumer groups are looked for periodically."""
    refresh_groups_interval_seconds: int = Field(default=600, ge=1, alias="refresh.groups.interval.seconds")
    """How often to look for new consumer groups."""
    checkpoints_topic_replication_factor: int = Field(default=3, alias="checkpoints.topic.replication.factor")
    """Replication factor of the checkpoints topic (-1: broker default)."""
    heartbeats_topic_replication_factor: int = Field(default=3, alias="heartbeats.topic.replication.factor")
    """Replication factor of the heartbeats topic (-1: broker default)."""
    offset_syncs_topic_replication_factor: int = Field(default=3, alias="offset-syncs.topic.replication.factor")
    """Replication factor of the offset-syncs topic and the offset map topic (-1: broker default)."""
    exactly_once_source_support: Literal["disabled", "preparing", "enabled"] = Field(
        default="disabled", alias="exactly.once.source.support"
    )
    """MM2's (Connect worker's) exactly-once switch, read globally, per target cluster
    (``B.exactly.once.source.support``) or per flow; ``enabled`` makes the flow exactly-once."""
    emit_offset_syncs_enabled: bool = Field(default=True, alias="emit.offset-syncs.enabled")
    """Also write MM2-format offset syncs for tools that read them (where each run of 1:1 offsets
    begins, and every ``offset.lag.max`` records along it)."""
    offset_lag_max: int = Field(default=100, ge=0, alias="offset.lag.max")
    """MM2's: a partition's offset sync is written again once the copy is this many records past the
    last one (a newer pair is written at most 60 s later, as MM2 writes its held ones). Only the
    MM2-format syncs follow it: sparkmirror's own translation is exact whatever it is."""
    offset_syncs_topic_location: Literal["source", "target"] = Field(
        default="source", alias="offset-syncs.topic.location"
    )
    """Cluster that holds ``mm2-offset-syncs.<target alias>.internal`` (MM2's default: the source)."""
    errors_tolerance: Literal["none", "all"] = Field(default="none", alias="errors.tolerance")
    """Connect's ``errors.tolerance``: ``none`` stops the flow on a non-retriable record error; ``all``
    writes the record and its error to ``dead_letter_topic`` and goes on."""
    dead_letter_topic: str = Field(default="", alias="errors.deadletterqueue.topic.name")
    """Dead-letter topic on the target used when ``errors.tolerance=all``. Default (unlike Connect's
    empty default): ``sparkmirror-dlq.<source alias>``."""
    spark: SparkSettings = Field(default_factory=lambda: SparkSettings())
    """Spark settings for this flow (global ``sparkmirror.*`` keys overridden by ``A->B.sparkmirror.*``)."""
    clients: Mapping[str, ClientProps] = Field(default_factory=dict)
    """Resolved client properties per role (see :data:`CLIENT_ROLES`); use the ``*_props`` methods."""

    @model_validator(mode="before")
    @classmethod
    def _defaults_from_aliases(cls, data: Any) -> Any:
        if isinstance(data, dict):
            dlq = data.get("dead_letter_topic", data.get("errors.deadletterqueue.topic.name"))
            if not dlq and data.get("source"):
                data = {k: v for k, v in data.items() if k != "errors.deadletterqueue.topic.name"}
                data["dead_letter_topic"] = f"sparkmirror-dlq.{data['source']}"
        return data

    @field_validator(
        "replication_factor",
        "checkpoints_topic_replication_factor",
        "heartbeats_topic_replication_factor",
        "offset_syncs_topic_replication_factor",
    )
    @classmethod
    def _replication_factor(cls, value: int) -> int:
        if value == 0 or value < -1:
            raise ValueError("expected a positive integer or -1 (broker default)")
        return value

    @property
    def exactly_once(self) -> bool:
        """Whether this flow writes exactly once (either switch turns it on)."""
        return self.exactly_once_source_support == "enabled" or self.spark.exactly_once

    @property
    def commit_interval_ms(self) -> int:
        """``sparkmirror.commit.interval.ms`` as set, else the default of the flow's mode."""
        if self.spark.commit_interval_ms is not None:
            return self.spark.commit_interval_ms
        return EXACTLY_ONCE_COMMIT_INTERVAL_MS if self.exactly_once else AT_LEAST_ONCE_COMMIT_INTERVAL_MS

    @field_validator("clients", mode="before")
    @classmethod
    def _hide_secrets(cls, value: Mapping[str, Mapping[str, Any]]) -> dict[str, ClientProps]:
        return {role: _protect(props) for role, props in value.items()}

    @model_validator(mode="after")
    def _check(self) -> FlowConfig:
        if self.source == self.target:
            raise ValueError(f"a flow needs two different clusters, got {self.source}->{self.target}")
        # Build the policy and filters once so that a bad class name or regex fails at load time.
        _ = self.policy, self.topic_filter, self.group_filter, self.config_property_filter
        return self

    @property
    def name(self) -> str:
        """The flow's name, ``source->target``."""
        return f"{self.source}->{self.target}"

    @cached_property
    def policy(self) -> ReplicationPolicy:
        """The replication policy instance (built once)."""
        return policy_from_name(
            self.replication_policy_class,
            self.replication_policy_separator,
            internal_topic_separator_enabled=self.replication_policy_internal_topic_separator_enabled,
        )

    @cached_property
    def topic_filter(self) -> TopicFilter:
        """Filter from ``topics`` and ``topics.exclude``."""
        return TopicFilter(self.topics, self.topics_exclude)

    @cached_property
    def group_filter(self) -> GroupFilter:
        """Filter from ``groups`` and ``groups.exclude``."""
        return GroupFilter(self.groups, self.groups_exclude)

    def replicates(self, topic: str, *, heartbeats: bool | None = None) -> bool:
        """MM2's rule (:func:`should_replicate_topic`) for ``topic`` on this flow; ``heartbeats``
        overrides ``heartbeats.replication.enabled`` (failover moves no heartbeat positions)."""
        return should_replicate_topic(
            topic,
            source_alias=self.source,
            target_alias=self.target,
            policy=self.policy,
            topic_filter=self.topic_filter,
            heartbeats_replication_enabled=self.heartbeats_replication_enabled if heartbeats is None else heartbeats,
        )

    @cached_property
    def config_property_filter(self) -> ConfigPropertyFilter:
        """Filter from ``config.properties.exclude``."""
        return ConfigPropertyFilter(self.config_properties_exclude)

    def _props(self, role: str, reveal_secrets: bool) -> dict[str, str]:
        return reveal(self.clients.get(role, {}), reveal_secrets)

    def source_consumer_props(self, reveal_secrets: bool = False) -> dict[str, str]:
        """Java-style properties of the consumer that reads the source topics."""
        return self._props("source_consumer", reveal_secrets)

    def source_admin_props(self, reveal_secrets: bool = False) -> dict[str, str]:
        """Java-style properties of the admin client on the source cluster."""
        return self._props("source_admin", reveal_secrets)

    def target_producer_props(self, reveal_secrets: bool = False) -> dict[str, str]:
        """Java-style properties of the producer that writes to the target cluster."""
        return self._props("target_producer", reveal_secrets)

    def target_admin_props(self, reveal_secrets: bool = False) -> dict[str, str]:
        """Java-style properties of the admin client on the target cluster."""
        return self._props("target_admin", reveal_secrets)

    def target_consumer_props(self, reveal_secrets: bool = False) -> dict[str, str]:
        """Java-style properties of a consumer on the target cluster (offset map, checkpoints)."""
        return self._props("target_consumer", reveal_secrets)

    def __str__(self) -> str:
        return f"FlowConfig({self.name}, enabled={self.enabled}, topics={list(self.topics)})"


class MirrorConfig(_Frozen):
    """A whole ``mm2.properties`` file: clusters, flows and global Spark settings."""

    clusters: dict[str, ClusterConfig]
    """Every cluster listed in ``clusters``, by alias, in the listed order."""
    flows: tuple[FlowConfig, ...]
    """Enabled flows (restricted by ``--clusters`` to the listed targets), in file order."""
    all_flows: tuple[FlowConfig, ...]
    """Every flow the file names (any ``A->B.`` key), enabled or not, in file order."""
    spark: SparkSettings = Field(default_factory=lambda: SparkSettings())
    """Global Spark settings (the top-level ``sparkmirror.*`` keys)."""
    unknown_keys: tuple[str, ...] = ()
    """Keys that neither MM2 nor sparkmirror knows; ignored (one warning lists them)."""

    def flow(self, name: str) -> FlowConfig:
        """The flow named ``A->B`` among :attr:`all_flows`; KeyError if there is none."""
        for flow in self.all_flows:
            if flow.name == name:
                return flow
        raise KeyError(name)

    def find_flow(self, source: str, target: str) -> FlowConfig | None:
        """The flow ``source->target`` among :attr:`all_flows`, enabled or not; None if the file names none."""
        return next((f for f in self.all_flows if f.source == source and f.target == target), None)

    def __str__(self) -> str:
        return (
            f"MirrorConfig(clusters={list(self.clusters)}, flows={[f.name for f in self.flows]}, "
            f"unknown_keys={list(self.unknown_keys)})"
        )
