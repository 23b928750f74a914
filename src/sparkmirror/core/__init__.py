"""sparkmirror's core: replication policies and filters (no pyspark, no Kafka client, ever)."""

from sparkmirror.core.filters import (
    DEFAULT_CONFIG_PROPERTIES_EXCLUDE,
    DEFAULT_GROUPS_EXCLUDE,
    DEFAULT_GROUPS_INCLUDE,
    DEFAULT_TOPICS_EXCLUDE,
    DEFAULT_TOPICS_INCLUDE,
    ConfigPropertyFilter,
    GroupFilter,
    TopicFilter,
    compile_pattern_list,
)
from sparkmirror.core.policy import (
    DEFAULT_HEARTBEATS_TOPIC,
    DEFAULT_POLICY_CLASS,
    IDENTITY_POLICY_CLASS,
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    ReplicationPolicy,
    is_cycle,
    policy_from_name,
    should_replicate_topic,
)

__all__ = [
    "DEFAULT_CONFIG_PROPERTIES_EXCLUDE",
    "DEFAULT_GROUPS_EXCLUDE",
    "DEFAULT_GROUPS_INCLUDE",
    "DEFAULT_HEARTBEATS_TOPIC",
    "DEFAULT_POLICY_CLASS",
    "DEFAULT_TOPICS_EXCLUDE",
    "DEFAULT_TOPICS_INCLUDE",
    "IDENTITY_POLICY_CLASS",
    "ConfigPropertyFilter",
    "DefaultReplicationPolicy",
    "GroupFilter",
    "IdentityReplicationPolicy",
    "ReplicationPolicy",
    "TopicFilter",
    "compile_pattern_list",
    "is_cycle",
    "policy_from_name",
    "should_replicate_topic",
]
