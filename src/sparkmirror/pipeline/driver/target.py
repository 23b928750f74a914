"""Prepares the target cluster for a flow: one place for everything the target must hold before
records flow.

Internal topics (the offset map, MM2's offset syncs, the checkpoints), the dead-letter topic
(``errors.tolerance=all``), the remote topics with the source's partition count and configs, and,
exactly-once, the fencing of every earlier writer of the flow's partitions. What it must never do:
delete or shrink anything on the target.
"""

from __future__ import annotations

import dataclasses
import functools
import logging

from sparkmirror.checkpoints.emitter import CheckpointEmitter
from sparkmirror.config.model import FlowConfig
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.kafka.internal import InternalTopicError, ensure_topic
from sparkmirror.kafka.retry import retry_kafka
from sparkmirror.kafka.topics import TopicSync
from sparkmirror.offsets.store import OffsetMapStore
from sparkmirror.offsets.syncs import OffsetSyncWriter
from sparkmirror.pipeline.exceptions import FlowFailed
from sparkmirror.pipeline.executor.plan import WritePlan

log = logging.getLogger(__name__)


class TargetPreparer:
    """Makes the target ready for one flow."""

    def __init__(
        self,
        clients: FlowClients,
        topics: TopicSync,
        store: OffsetMapStore,
        syncs: OffsetSyncWriter,
        checkpoints: CheckpointEmitter,
    ) -> None:
        self.flow: FlowConfig = clients.flow
        self.clients = clients
        self.topics = topics
        self.store = store
        self.syncs = syncs
        self.checkpoints = checkpoints

    def internal_topics(self) -> None:
        """The offset map's and MM2's offset-sync topics, and the checkpoints topic when checkpoints are kept."""
        self.store.ensure_topic()
        self.syncs.ensure_topic()
        if self.flow.emit_checkpoints_enabled or self.flow.sync_group_offsets_enabled:
            self.checkpoints.ensure_topic()

    def remote_topics(self, topics: dict[str, int], *, configs: bool) -> None:
        """The dead-letter topic, then the remote topics of ``topics`` (source topic -> partitions)."""
        flow = self.flow
        if flow.errors_tolerance == "all" and flow.dead_letter_topic:
            try:
                ensure_topic(
                    self.clients.target_admin,
                    flow.dead_letter_topic,
                    replication_factor=flow.replication_factor,
                    purpose=f"dead-letter topic of flow {flow.name}",
                    key="replication.factor",
                )
            except InternalTopicError as exc:
                # Refused by the target (ACLs, a policy): records would have nowhere to go.
                raise FlowFailed(
                    f"flow={flow.name} cannot create dead-letter topic {flow.dead_letter_topic}: {exc}"
                ) from None
        self.topics.sync(topics, configs=configs)

    def fit_writer(self, plan: WritePlan, topics: dict[str, int]) -> WritePlan:
        """The plan with the producer's batches sized to what the remote topics accept.

        A batch larger than a topic's ``max.message.bytes`` is refused whole, small records
        included; so batches stay below the smallest limit and a single record above its topic's
        limit is settled on its own (the sink's size check).
        """
        limits = self.topics.max_message_bytes(topics)
        conf = dict(self.clients.target_producer)
        if limits:
            conf["batch.size"] = str(min(int(conf.get("batch.size", "1000000")), min(limits.values())))
            conf["message.max.bytes"] = str(
                max(int(conf.get("message.max.bytes", "1000000")), max(limits.values()) + 1024)
            )
        return dataclasses.replace(plan, producer_config=conf, max_record_bytes=limits)

    def fence(self, plan: WritePlan, topics: dict[str, int]) -> None:
        """Fence earlier writers of every partition, aborting their open transactions (exactly-once).

        A killed run leaves transactions open until ``transaction.timeout.ms``; while one is open,
        read_committed readers (the offset map's loader) cannot see past it. ``init_transactions``
        with each partition's transactional.id aborts them now.
        """
        from sparkmirror.kafka.factory import new_producer

        for topic, partitions in topics.items():
            for p in range(partitions):
                producer = new_producer(plan.transactional_producer_config(topic, p))
                retry_kafka(functools.partial(producer.init_transactions, 60), what=f"fencing {topic}[{p}]")
                producer.flush(0)
