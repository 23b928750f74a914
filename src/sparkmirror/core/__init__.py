"""sparkmirror's core: replication policies, filters, record formats, the offset map and
checkpoint rules (no pyspark, no Kafka client, ever)."""

from sparkmirror.core.checkpoints import CheckpointState, group_offset_sync_decision
from sparkmirror.core.exceptions import CoreError, FormatError, NotLoadedError, OffsetMapError
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
from sparkmirror.core.formats import Checkpoint, Heartbeat, OffsetChain, OffsetSegment, OffsetSync
from sparkmirror.core.offsetmap import (
    Chain,
    Method,
    OffsetMap,
    PartitionMap,
    Segment,
    Translation,
    segments_from_offsets,
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
    "Checkpoint",
    "CheckpointState",
    "ConfigPropertyFilter",
    "CoreError",
    "DefaultReplicationPolicy",
    "FormatError",
    "GroupFilter",
    "Heartbeat",
    "IdentityReplicationPolicy",
    "Method",
    "NotLoadedError",
    "Chain",
    "OffsetChain",
    "OffsetMap",
    "OffsetMapError",
    "OffsetSegment",
    "OffsetSync",
    "PartitionMap",
    "ReplicationPolicy",
    "Segment",
    "TopicFilter",
    "Translation",
    "compile_pattern_list",
    "group_offset_sync_decision",
    "is_cycle",
    "policy_from_name",
    "segments_from_offsets",
    "should_replicate_topic",
]
