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
from concurrent.futures import ThreadPoolExecutor

from sparkmirror.checkpoints.emitter import CheckpointEmitter
from sparkmirror.config.model import FlowConfig
from sparkmirror.core.naming import transactions_group
from sparkmirror.core.transactions import (
    format_layouts,
    layout_ids,
    layout_names,
    layouts_to_fence,
    parse_layouts,
)
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.kafka.groups import commit_positions, committed_positions
from sparkmirror.kafka.internal import InternalTopicError, ensure_topic
from sparkmirror.kafka.retry import retry_kafka
from sparkmirror.kafka.topics import TopicSync
from sparkmirror.offsets.store import OffsetMapStore
from sparkmirror.offsets.syncs import OffsetSyncWriter
from sparkmirror.pipeline.exceptions import FlowFailed
from sparkmirror.pipeline.executor.plan import WritePlan

log = logging.getLogger(__name__)

#: Transactional ids fenced at the same time at start (each is a producer and a few round trips).
_FENCE_THREADS = 8


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
        java = dict(plan.java_producer_config)
        if limits and java:  # the transport's producer (Java's name of librdkafka's message.max.bytes)
            java["batch.size"] = str(min(int(java.get("batch.size", "16384")), min(limits.values())))
            java["max.request.size"] = str(
                max(int(java.get("max.request.size", "1048576")), max(limits.values()) + 1024)
            )
        return dataclasses.replace(plan, producer_config=conf, java_producer_config=java, max_record_bytes=limits)

    def fence(self, plan: WritePlan, topics: dict[str, int]) -> None:
        """Fence every earlier writer of the flow's partitions, aborting their open transactions (exactly-once).

        A killed run leaves transactions open until ``transaction.timeout.ms``; while one is open,
        read_committed readers (the offset map's loader) cannot see past it, and a zombie could
        still commit. ``init_transactions`` with each transactional id that may hold one aborts
        them now: the ids of every layout recorded on the target (the layouts used since the last
        complete fencing; none recorded: the per-partition ids of earlier versions), and of the
        plan's layout. Only then is the plan's layout recorded alone, so a crash in between leaves
        the old layouts on record to be fenced by the next start (docs/decisions.md, "Exactly-once:
        one transaction per group of partitions").
        """
        flow = self.flow
        record_at = (plan.offset_map_topic, 0)
        group = transactions_group(flow.source, flow.target)
        current = plan.transaction_groups
        recorded = committed_positions(plan.consumer_config, group, [record_at]).get(record_at)
        layouts = parse_layouts(recorded[1] if recorded else None)
        fence = layouts_to_fence(layouts, current)
        if layouts is not None and layouts != {current}:
            log.info(
                "flow=%s exactly-once transactions: %s on record, now %s: fencing the ids of each",
                flow.name,
                layout_names(layouts),
                layout_names({current}),
            )
        # Recorded before the first write with it: a crash from here on leaves it to the next start.
        self.record_layouts(plan, fence)
        ids = [tid for g in sorted(fence) for tid in layout_ids(flow.source, flow.target, g, topics)]
        fence_ids(plan, ids)
        self.record_layouts(plan, {current})

    def record_layouts(self, plan: WritePlan, layouts: set[int]) -> None:
        """Record (or renew: a group's offsets expire) the layouts that may hold open transactions."""
        commit_positions(
            plan.consumer_config,
            transactions_group(self.flow.source, self.flow.target),
            {(plan.offset_map_topic, 0): (0, format_layouts(layouts))},
        )


def fence_ids(plan: WritePlan, ids: list[str]) -> None:
    """``init_transactions`` with each of ``ids``, a few at a time: fences its producers and aborts its
    open transaction."""
    from sparkmirror.kafka.factory import new_producer

    def fence_one(tid: str) -> None:
        producer = new_producer(plan.transactional_config(tid))
        retry_kafka(functools.partial(producer.init_transactions, 60), what=f"fencing {tid}")
        producer.flush(0)

    with ThreadPoolExecutor(max_workers=_FENCE_THREADS, thread_name_prefix="sparkmirror-fence") as pool:
        for future in [pool.submit(fence_one, tid) for tid in ids]:
            future.result()
