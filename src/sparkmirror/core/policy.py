"""Replication policies: how remote topic names are formed and read back, as MirrorMaker 2 does it.

This is the only code that knows how a topic on the target is named after its source
(``A.orders`` under the default policy, ``orders`` under the identity policy), which
topics are internal, and which topics would close a replication cycle. Names must be
exactly MM2's so that MM2 tools and ``RemoteClusterUtils`` work against a sparkmirror
target. This module must never import pyspark or a Kafka client.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from sparkmirror.core.filters import TopicFilter
from sparkmirror.errors import ConfigError

__all__ = [
    "DEFAULT_HEARTBEATS_TOPIC",
    "DEFAULT_POLICY_CLASS",
    "IDENTITY_POLICY_CLASS",
    "DefaultReplicationPolicy",
    "IdentityReplicationPolicy",
    "ReplicationPolicy",
    "is_cycle",
    "policy_from_name",
    "should_replicate_topic",
]

#: MM2's heartbeats topic name.
DEFAULT_HEARTBEATS_TOPIC = "heartbeats"
#: Kafka's class name of the default policy (the default of ``replication.policy.class``).
DEFAULT_POLICY_CLASS = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
#: Kafka's class name of the identity policy.
IDENTITY_POLICY_CLASS = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"

_INTERNAL_SUFFIX = ".internal"
_CHECKPOINTS_SUFFIX = ".checkpoints.internal"


class ReplicationPolicy(ABC):
    """Which topics are remote topics, and how their names relate to their source."""

    @abstractmethod
    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        """Name on the target of ``topic`` replicated from cluster ``source_alias``."""

    @abstractmethod
    def topic_source(self, topic: str) -> str | None:
        """Alias of the cluster ``topic`` was replicated from; None if it is not a remote topic."""

    @abstractmethod
    def upstream_topic(self, topic: str) -> str | None:
        """Name of ``topic`` on its immediate source cluster (may itself be remote); None if not remote."""

    def original_topic(self, topic: str) -> str:
        """Name of the topic where it was first produced, following every replication hop."""
        current = topic
        while True:
            upstream = self.upstream_topic(current)
            # A policy that cannot tell (identity) returns the topic itself: stop there.
            if upstream is None or upstream == current:
                return current
            current = upstream

    def heartbeats_topic(self) -> str:
        """Name of the heartbeats topic."""
        return DEFAULT_HEARTBEATS_TOPIC

    def offset_syncs_topic(self, alias: str) -> str:
        """MM2's offset-syncs topic for cluster ``alias``: ``mm2-offset-syncs.<alias>.internal``."""
        return f"mm2-offset-syncs.{alias}{_INTERNAL_SUFFIX}"

    def checkpoints_topic(self, alias: str) -> str:
        """MM2's checkpoints topic for source cluster ``alias``: ``<alias>.checkpoints.internal``."""
        return f"{alias}{_CHECKPOINTS_SUFFIX}"

    def is_heartbeats_topic(self, topic: str) -> bool:
        """True for ``heartbeats`` and any remote copy of it (``A.heartbeats``, ``B.A.heartbeats``)."""
        return self.original_topic(topic) == self.heartbeats_topic()

    def is_checkpoints_topic(self, topic: str) -> bool:
        """True for a checkpoints topic of any cluster."""
        return topic.endswith(_CHECKPOINTS_SUFFIX)

    def is_mm2_internal_topic(self, topic: str) -> bool:
        """True for MM2's own topics: checkpoints, offset-syncs and the ``mm2-*`` Connect topics."""
        return topic.endswith(_INTERNAL_SUFFIX)

    def is_internal_topic(self, topic: str) -> bool:
        """True for topics that are never replicated.

        Kafka's internal topics (``__consumer_offsets``, ``__transaction_state``, anything starting
        with ``__`` or ``.``), Connect's default internal topics (``*-internal``, ``*.internal``)
        and MM2's own topics (checkpoints, offset-syncs, ``mm2-offsets|configs|status.*.internal``).
        """
        return (
            self.is_mm2_internal_topic(topic)
            or topic.startswith("__")
            or topic.startswith(".")
            or topic.endswith("-internal")
            or topic.endswith(_INTERNAL_SUFFIX)
        )


class DefaultReplicationPolicy(ReplicationPolicy):
    """MM2's default policy: the remote name is ``<source alias><separator><topic>``.

    ``separator`` is ``replication.policy.separator`` (default ``.``). When
    ``internal_topic_separator_enabled`` (``replication.policy.internal.topic.separator.enabled``,
    default true) the separator is also used in the checkpoints and offset-syncs topic names,
    as in MM2; when false those keep ``.``.
    """

    def __init__(self, separator: str = ".", *, internal_topic_separator_enabled: bool = True) -> None:
        if not separator:
            raise ConfigError(
                "replication.policy.separator: expected a non-empty string, got ''",
                key="replication.policy.separator",
            )
        self.separator = separator
        self.internal_topic_separator_enabled = internal_topic_separator_enabled

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        # Java's String.split drops trailing empty strings; "A." is therefore not a remote topic.
        parts = topic.split(self.separator)
        while parts and parts[-1] == "":
            parts.pop()
        if len(parts) < 2:
            return None
        return parts[0]

    def upstream_topic(self, topic: str) -> str | None:
        source = self.topic_source(topic)
        if source is None:
            return None
        return topic[len(source) + len(self.separator) :]

    def _internal_separator(self) -> str:
        return self.separator if self.internal_topic_separator_enabled else "."

    def offset_syncs_topic(self, alias: str) -> str:
        sep = self._internal_separator()
        return f"mm2-offset-syncs{sep}{alias}{sep}internal"

    def checkpoints_topic(self, alias: str) -> str:
        sep = self._internal_separator()
        return f"{alias}{sep}checkpoints{sep}internal"

    def is_checkpoints_topic(self, topic: str) -> bool:
        sep = self._internal_separator()
        return topic.endswith(f"{sep}checkpoints{sep}internal")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return topic.endswith(f"{self._internal_separator()}internal")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(separator={self.separator!r})"

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and isinstance(other, DefaultReplicationPolicy)
            and other.separator == self.separator
            and other.internal_topic_separator_enabled == self.internal_topic_separator_enabled
        )

    def __hash__(self) -> int:
        return hash((type(self), self.separator, self.internal_topic_separator_enabled))


class IdentityReplicationPolicy(DefaultReplicationPolicy):
    """MM2's identity policy: remote topics keep their name (migrations, one-way mirroring).

    The source of a topic cannot be read from its name, so ``topic_source`` returns
    ``source_cluster_alias`` (None unless given, like MM2's ``source.cluster.alias``) and
    cycles cannot be detected: the topology must be acyclic. Heartbeats are the exception:
    they are named like the default policy does (``A.heartbeats``), so they still show the path.
    """

    def __init__(
        self,
        separator: str = ".",
        *,
        internal_topic_separator_enabled: bool = True,
        source_cluster_alias: str | None = None,
    ) -> None:
        super().__init__(separator, internal_topic_separator_enabled=internal_topic_separator_enabled)
        self.source_cluster_alias = source_cluster_alias

    def _looks_like_heartbeat(self, topic: str) -> bool:
        return topic.endswith(self.heartbeats_topic())

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        if self._looks_like_heartbeat(topic):
            return super().format_remote_topic(source_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        if self._looks_like_heartbeat(topic):
            return super().topic_source(topic)
        return self.source_cluster_alias

    def upstream_topic(self, topic: str) -> str | None:
        if self._looks_like_heartbeat(topic):
            return super().upstream_topic(topic)
        return topic


_POLICIES: dict[str, type[DefaultReplicationPolicy]] = {
    DEFAULT_POLICY_CLASS.lower(): DefaultReplicationPolicy,
    "defaultreplicationpolicy": DefaultReplicationPolicy,
    "default": DefaultReplicationPolicy,
    IDENTITY_POLICY_CLASS.lower(): IdentityReplicationPolicy,
    "identityreplicationpolicy": IdentityReplicationPolicy,
    "identity": IdentityReplicationPolicy,
}


def policy_from_name(
    class_name: str,
    separator: str = ".",
    *,
    internal_topic_separator_enabled: bool = True,
    key: str = "replication.policy.class",
) -> ReplicationPolicy:
    """The policy named by ``replication.policy.class``.

    Accepts Kafka's class names, their simple names and ``default``/``identity``, in any case.
    Custom Java policies cannot run here; anything else raises :class:`ConfigError`.
    """
    cls = _POLICIES.get(class_name.strip().lower())
    if cls is None:
        raise ConfigError(
            f"{key}: unsupported replication policy {class_name!r}; expected one of "
            f"{DEFAULT_POLICY_CLASS}, {IDENTITY_POLICY_CLASS}, DefaultReplicationPolicy, "
            "IdentityReplicationPolicy, default, identity",
            key=key,
        )
    return cls(separator, internal_topic_separator_enabled=internal_topic_separator_enabled)


def is_cycle(policy: ReplicationPolicy, topic: str, target_alias: str) -> bool:
    """True when ``topic`` came from ``target_alias``, directly or over several hops.

    Mirroring it to ``target_alias`` would send data back where it started (A->B->A).
    Identity-like policies, whose upstream topic is the topic itself, never report a cycle.
    """
    current = topic
    while True:
        source = policy.topic_source(current)
        if source is None:
            return False
        if source == target_alias:
            return True
        upstream = policy.upstream_topic(current)
        if upstream is None or upstream == current:
            return False
        current = upstream


def should_replicate_topic(
    topic: str,
    *,
    source_alias: str,
    target_alias: str,
    policy: ReplicationPolicy,
    topic_filter: TopicFilter,
    heartbeats_replication_enabled: bool = True,
) -> bool:
    """MM2's rule for mirroring ``topic`` from ``source_alias`` to ``target_alias``.

    Selected by the topic filter, or a heartbeats topic (when ``heartbeats.replication.enabled``,
    default true, so heartbeats pass even a narrow ``topics`` list); and in every case not an
    internal topic and not a cycle back to the target.
    """
    if source_alias == target_alias:
        raise ValueError(f"source and target are the same cluster: {source_alias!r}")
    selected = topic_filter.matches(topic) or (heartbeats_replication_enabled and policy.is_heartbeats_topic(topic))
    return selected and not policy.is_internal_topic(topic) and not is_cycle(policy, topic, target_alias)
