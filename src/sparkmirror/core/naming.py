"""The names sparkmirror gives its own things on the clusters: internal topics, groups, transactional ids.

One module so that the run, translate, failover and the client API agree on every name; the
replication policy (:mod:`sparkmirror.core.policy`) owns the names MM2 defines (remote topics,
``<alias>.checkpoints.internal``, ``heartbeats``). Pure functions: no pyspark, no Kafka client.
"""

from __future__ import annotations

import re

#: Group-name prefixes of the mirror's own consumers, never checkpointed, synced or failed over,
#: whatever ``groups`` says: ``__sparkmirror`` (the copy tasks' source reader, the progress and the
#: other groups named here), ``sparkmirror-reader-`` (the client API's checkpoint reader, by default)
#: and ``spark-kafka-source-`` (Spark's Kafka source, which the retired micro-batch engine read with).
OWN_GROUP_PREFIXES = ("spark-kafka-source-", "sparkmirror-reader-", "__sparkmirror")

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def offset_map_topic(source_alias: str) -> str:
    """The compacted topic on the target that holds the flow's offset map segments."""
    return f"sparkmirror-offset-map.{source_alias}.internal"


def progress_group(source_alias: str, target_alias: str) -> str:
    """The target group whose offsets on the remote topics hold a flow's progress (at least once and exactly once).

    ``__``-prefixed so MM2's default ``groups.exclude`` (and ours) never checkpoints or syncs it.
    """
    return f"__sparkmirror.progress.{source_alias}-{target_alias}"


def lease_group(source_alias: str, target_alias: str) -> str:
    """The target group whose one member is the flow's running instance (one instance per flow).

    ``__``-prefixed: never checkpointed, synced or failed over.
    """
    return f"__sparkmirror.lease.{source_alias}-{target_alias}"


def topic_ids_group(source_alias: str, target_alias: str) -> str:
    """The target group whose commit metadata records the id of each mirrored source topic.

    ``__``-prefixed: never checkpointed, synced or failed over.
    """
    return f"__sparkmirror.topic-ids.{source_alias}-{target_alias}"


def transactions_group(source_alias: str, target_alias: str) -> str:
    """The target group whose commit metadata records the exactly-once layouts that may hold open
    transactions (:mod:`sparkmirror.core.transactions`).

    ``__``-prefixed: never checkpointed, synced or failed over.
    """
    return f"__sparkmirror.transactions.{source_alias}-{target_alias}"


def reader_group(flow_name: str) -> str:
    """The ``group.id`` of the copy tasks' source consumers: never joined, never committed to."""
    return f"__sparkmirror.reader.{flow_name}"


def transactional_id(source_alias: str, target_alias: str, topic: str, partition: int) -> str:
    """Stable per (flow, source topic, partition): the exactly-once fencing key."""
    return f"sparkmirror-{source_alias}-{target_alias}-{_UNSAFE.sub('_', topic)}-{partition}"


def is_own_group(group: str) -> bool:
    """A group of the mirror's own consumers (see :data:`OWN_GROUP_PREFIXES`)."""
    return group.startswith(OWN_GROUP_PREFIXES)
