"""The pure half of MM2's ``MirrorClient``: what topic names say, and the latest checkpoints.

Kafka's ``MirrorClient`` (``connect-mirror-client``) answers an application's questions
about a cluster from two things: the names of its topics (which are heartbeat and
checkpoint topics, which clusters are upstream and how many hops away) and the records of
a ``<source>.checkpoints.internal`` topic (where a source group is, translated). This
module holds that logic with MM2's semantics, as functions of topic names and a
:class:`~sparkmirror.core.policy.ReplicationPolicy`, and :class:`CheckpointIndex`, which
folds checkpoint records into the latest checkpoint per (group, topic, partition).
:mod:`sparkmirror.client` feeds both from a live cluster.

Rules kept here (tests carry their names):

* hops are counted along the replication path of a heartbeat topic (``B.A.heartbeats``
  is two hops from A), the shortest path wins, -1 when no heartbeat topic leads to the
  cluster, and a path that revisits a cluster (possible with identity-like policies)
  never reaches it;
* the latest checkpoint record for a key wins, even one lower than before (the reader
  cannot keep the no-rewind rule; only the writer can);
* a tombstone deletes its key (Kafka's client fails on one instead);
* a record that is not a checkpoint is skipped and counted, as Kafka's client skips it.

This module must never import pyspark or a Kafka client.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from sparkmirror.core.exceptions import FormatError
from sparkmirror.core.formats import Checkpoint
from sparkmirror.core.policy import ReplicationPolicy, policy_from_name
from sparkmirror.errors import ConfigError

__all__ = [
    "POLICY_CLASS_KEY",
    "POLICY_INTERNAL_SEPARATOR_KEY",
    "POLICY_SEPARATOR_KEY",
    "CheckpointIndex",
    "TopicPartition",
    "all_sources",
    "checkpoint_topics_in",
    "count_hops",
    "heartbeat_topics_in",
    "remote_topics_in",
    "replication_hops_in",
    "resolve_policy",
    "upstream_clusters_in",
]

log = logging.getLogger(__name__)

#: MirrorClientConfig's keys for the replication policy (read from a client's properties).
POLICY_CLASS_KEY = "replication.policy.class"
POLICY_SEPARATOR_KEY = "replication.policy.separator"
POLICY_INTERNAL_SEPARATOR_KEY = "replication.policy.internal.topic.separator.enabled"
_POLICY_KEYS = (POLICY_CLASS_KEY, POLICY_SEPARATOR_KEY, POLICY_INTERNAL_SEPARATOR_KEY)


class TopicPartition(NamedTuple):
    """A topic and a partition number; hashable, so it keys offset dictionaries.

    >>> TopicPartition("A.orders", 0)
    TopicPartition(topic='A.orders', partition=0)
    """

    topic: str
    partition: int


# -- topic names -----------------------------------------------------------------------------


def count_hops(topic: str, upstream_alias: str, policy: ReplicationPolicy) -> int:
    """Hops from cluster ``upstream_alias`` to here along ``topic``'s replication path; -1 if none.

    ``A.heartbeats`` is 1 hop from A, ``B.A.heartbeats`` 2 from A and 1 from B; ``heartbeats``
    (local) leads nowhere. A path that comes back to a cluster it passed is a loop that an
    identity-like policy cannot tell apart from a path; it never reaches ``upstream_alias``.

    >>> from sparkmirror.core.policy import DefaultReplicationPolicy
    >>> count_hops("B.A.heartbeats", "A", DefaultReplicationPolicy())
    2
    """
    hops = 0
    visited: set[str] = set()
    current: str | None = topic
    while current is not None:
        hops += 1
        source = policy.topic_source(current)
        if source is None:
            return -1
        if source == upstream_alias:
            return hops
        if source in visited:  # a loop (identity-like policies): the alias is not on it
            return -1
        visited.add(source)
        current = policy.upstream_topic(current)
    return -1


def heartbeat_topics_in(topics: Iterable[str], policy: ReplicationPolicy) -> set[str]:
    """The heartbeat topics among ``topics``: ``heartbeats`` and its remote copies (``A.heartbeats``, ...)."""
    return {t for t in topics if policy.is_heartbeats_topic(t)}


def checkpoint_topics_in(topics: Iterable[str], policy: ReplicationPolicy) -> set[str]:
    """The checkpoint topics among ``topics`` (``<alias>.checkpoints.internal`` under ``policy``'s separators)."""
    return {t for t in topics if policy.is_checkpoints_topic(t)}


def remote_topics_in(topics: Iterable[str], policy: ReplicationPolicy, source: str | None = None) -> set[str]:
    """Topics replicated from another cluster (``source`` only, when given); internal topics excluded."""
    out = set()
    for t in topics:
        if policy.is_internal_topic(t):
            continue
        origin = policy.topic_source(t)
        if origin is not None and (source is None or origin == source):
            out.add(t)
    return out


def replication_hops_in(topics: Iterable[str], upstream_alias: str, policy: ReplicationPolicy) -> int:
    """Fewest hops from ``upstream_alias`` over the heartbeat topics among ``topics``; -1 if unreachable.

    >>> from sparkmirror.core.policy import DefaultReplicationPolicy
    >>> replication_hops_in(["A.heartbeats", "C.B.A.heartbeats", "orders"], "A", DefaultReplicationPolicy())
    1
    """
    counts = [count_hops(t, upstream_alias, policy) for t in heartbeat_topics_in(topics, policy)]
    return min((c for c in counts if c != -1), default=-1)


def all_sources(topic: str, policy: ReplicationPolicy) -> set[str]:
    """Every cluster along ``topic``'s replication path: ``C.B.A.heartbeats`` -> {C, B, A}."""
    sources: set[str] = set()
    current = topic
    source = policy.topic_source(current)
    # The membership test stops identity-like policies, whose path can loop.
    while source is not None and source not in sources:
        sources.add(source)
        upstream = policy.upstream_topic(current)
        if upstream is None:
            break
        current = upstream
        source = policy.topic_source(current)
    return sources


def upstream_clusters_in(topics: Iterable[str], policy: ReplicationPolicy) -> set[str]:
    """Clusters that replicate here, directly or over several hops, read from the heartbeat topics.

    >>> from sparkmirror.core.policy import DefaultReplicationPolicy
    >>> sorted(upstream_clusters_in(["A.heartbeats", "C.B.heartbeats", "A.orders"], DefaultReplicationPolicy()))
    ['A', 'B', 'C']
    """
    out: set[str] = set()
    for t in heartbeat_topics_in(topics, policy):
        out |= all_sources(t, policy)
    return out


def resolve_policy(
    config: Mapping[str, Any] | None,
    replication_policy: str | ReplicationPolicy | None = None,
    separator: str | None = None,
    internal_topic_separator_enabled: bool | None = None,
) -> tuple[ReplicationPolicy, dict[str, Any]]:
    """The replication policy a client uses, and ``config`` without the policy's keys.

    As Kafka's ``MirrorClientConfig``, the policy can come from the client properties
    (``replication.policy.class``, ``replication.policy.separator``,
    ``replication.policy.internal.topic.separator.enabled``); a keyword argument that is
    not None wins over the property. Defaults are MM2's: the default policy, ``.``,
    internal topic separator enabled. A :class:`ReplicationPolicy` instance is used as is.

    >>> policy, rest = resolve_policy({"replication.policy.separator": "_", "security.protocol": "SSL"})
    >>> policy.checkpoints_topic("A"), rest
    ('A_checkpoints_internal', {'security.protocol': 'SSL'})
    """
    props = dict(config or {})
    from_props = {k: props.pop(k) for k in _POLICY_KEYS if k in props}
    if isinstance(replication_policy, ReplicationPolicy):
        return replication_policy, props
    name = replication_policy if replication_policy is not None else str(from_props.get(POLICY_CLASS_KEY, "default"))
    sep = separator if separator is not None else str(from_props.get(POLICY_SEPARATOR_KEY, "."))
    if internal_topic_separator_enabled is not None:
        internal = internal_topic_separator_enabled
    else:
        raw = str(from_props.get(POLICY_INTERNAL_SEPARATOR_KEY, "true")).strip().lower()
        if raw not in ("true", "false"):
            raise ConfigError(
                f"{POLICY_INTERNAL_SEPARATOR_KEY}: expected true or false, got {raw!r}",
                key=POLICY_INTERNAL_SEPARATOR_KEY,
            )
        internal = raw == "true"
    return policy_from_name(name, sep, internal_topic_separator_enabled=internal, key=POLICY_CLASS_KEY), props


# -- checkpoints -----------------------------------------------------------------------------


class CheckpointIndex:
    """The latest checkpoint per (group, topic, partition), built from checkpoint records in log order.

    Feed it every record of a checkpoints topic partition, in offset order, with
    :meth:`apply`; ask it for a group with :meth:`checkpoints` or :meth:`offsets`.
    The later record for a key always wins (even if it is lower); a tombstone deletes
    its key; a record that does not decode as a checkpoint is skipped and counted.
    Not thread-safe by itself: :mod:`sparkmirror.client` holds a lock around it.

    >>> from sparkmirror.core.formats import Checkpoint
    >>> index = CheckpointIndex()
    >>> c = Checkpoint("app", "A.orders", 0, upstream_offset=100, downstream_offset=90)
    >>> index.apply(c.key_bytes(), c.value_bytes())
    >>> index.offsets("app")
    {TopicPartition(topic='A.orders', partition=0): 90}
    >>> index.apply(c.key_bytes(), None)  # a tombstone
    >>> index.offsets("app"), index.records_read
    ({}, 2)
    """

    def __init__(self) -> None:
        self._by_group: dict[str, dict[TopicPartition, Checkpoint]] = {}
        #: Records given to :meth:`apply` (checkpoints, tombstones and skipped records).
        self.records_read = 0
        #: Records that were neither a checkpoint nor a tombstone of one.
        self.records_skipped = 0

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """Fold one record (the next in log order) into the index."""
        self.records_read += 1
        if value is None:
            self._delete(key)
            return
        try:
            cp = Checkpoint.decode(key, value)
        except FormatError as exc:
            self.records_skipped += 1
            log.debug("skipping a record that is not a checkpoint: %s", exc)
            return
        self._by_group.setdefault(cp.group, {})[TopicPartition(cp.topic, cp.partition)] = cp

    def _delete(self, key: bytes | None) -> None:
        try:
            group, topic, partition = Checkpoint.KEY_SCHEMA.read_exactly(key or b"", what="Checkpoint key")
        except FormatError as exc:
            self.records_skipped += 1
            log.debug("skipping a tombstone whose key is not a checkpoint's: %s", exc)
            return
        assert isinstance(group, str) and isinstance(topic, str) and isinstance(partition, int)
        entries = self._by_group.get(group)
        if entries is None:
            return
        entries.pop(TopicPartition(topic, partition), None)
        if not entries:
            del self._by_group[group]

    def checkpoints(self, group: str) -> dict[TopicPartition, Checkpoint]:
        """The latest checkpoint of each topic partition of ``group`` (empty if it has none)."""
        return dict(self._by_group.get(group, {}))

    def offsets(self, group: str) -> dict[TopicPartition, int]:
        """``group``'s translated (downstream) offset per topic partition, as the checkpoints name them."""
        return {tp: cp.downstream_offset for tp, cp in self._by_group.get(group, {}).items()}

    def groups(self) -> set[str]:
        """Groups that have at least one checkpoint."""
        return set(self._by_group)

    def clear(self) -> None:
        """Forget every checkpoint (the topic was recreated); the counters keep counting."""
        self._by_group.clear()

    def __len__(self) -> int:
        """Number of (group, topic, partition) entries."""
        return sum(len(v) for v in self._by_group.values())
