"""Source topics that go away: a topic the flow mirrored that no longer exists on the source.

Found on every start of the copy (a restart, a topic refresh, so within
``refresh.topics.interval.seconds``: the tasks meanwhile read nothing more of it, without an
error, as measured on Kafka 4.1 with librdkafka): the topics the flow mirrored (the
offset map names them, and the topics of the copy just stopped) that the source cluster no longer
lists at all (a topic only left out by ``topics``/``topics.exclude`` still exists and is not
deleted). Each is said once with what was mirrored of it and counted
(``sparkmirror_source_topic_deletions_total``); the flow goes on with the others.

Its remote topic is left as it is, as MM2 leaves it, unless ``sparkmirror.sync.topic.deletions =
true``: then it is deleted on the target, but only once both hold, checked at every topic
refresh until they do:

1. every record of it the source held was mirrored: each partition's next offset to copy (the
   offset map) reached the source's end as the copy last saw it; a topic deleted while the flow was
   not copying has no end on record and is never deleted (said once);
2. no consumer group on the target reads it: none has a committed offset on it or a member
   assigned to it (sparkmirror's own groups aside).

What it must never do: delete a remote topic whose records a consumer may still need, or mistake a
topic that exists (excluded, or momentarily unlisted) for a deleted one. A topic the mirror's
principal may no longer describe looks deleted: that is why deletion sync is off by default.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from sparkmirror.core.naming import is_own_group
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.kafka.groups import committed_offsets
from sparkmirror.kafka.retry import retry_kafka
from sparkmirror.offsets.store import OffsetMapStore

if TYPE_CHECKING:
    from sparkmirror.metrics.exporter import FlowMetrics

log = logging.getLogger(__name__)

PartitionKey = tuple[str, int]


class TopicDeletions:
    """One flow's deleted source topics: said, counted, and (if asked) their remote topics deleted."""

    def __init__(
        self,
        clients: FlowClients,
        store: OffsetMapStore,
        remote_name: Callable[[str], str],
        *,
        sync: bool,
        metrics: FlowMetrics | None = None,
    ) -> None:
        self.clients = clients
        self.flow = clients.flow.name
        self.store = store
        self.remote_name = remote_name
        self.sync_enabled = sync
        self.metrics = metrics
        #: Deleted source topics found by this process (said once each).
        self.deleted: set[str] = set()
        #: Of those, the ones whose remote topic is to be deleted once it is safe.
        self.pending: set[str] = set()
        #: (next offset to copy, source end) of each partition as the copy last reported it.
        self.ends: dict[PartitionKey, tuple[int, int]] = {}

    def positions(self, positions: Mapping[PartitionKey, tuple[int, int]]) -> None:
        """The copy's latest positions (kept: the topic's end is unknowable once it is deleted)."""
        self.ends.update(positions)

    def check(self, topics: Iterable[str], mirrored_before: Iterable[str]) -> list[str]:
        """The topics of ``mirrored_before`` (and of the offset map) gone from the source cluster, said
        and counted once; ``topics``: the source topics the flow copies now. Returns the new ones."""
        current = set(topics)
        known = {t for t, _p in self.store.tails()} | set(mirrored_before)
        gone = sorted(known - current - self.deleted)
        if not gone:
            return []
        admin = self.clients.source_admin
        listed = retry_kafka(lambda: admin.list_topics(timeout=30), what="list the source topics").topics
        found = [t for t in gone if t not in listed]
        for topic in found:
            self.deleted.add(topic)
            tails = {p: up + n for (t, p), (up, _down, n) in self.store.tails().items() if t == topic}
            shown = ", ".join(f"[{p}] up to offset {o}" for p, o in sorted(tails.items())) or "nothing"
            remote = self.remote_name(topic)
            if self.sync_enabled:
                then = (
                    f"its remote topic {remote} on {self.clients.flow.target} is deleted once every record of it "
                    "was mirrored and no consumer group on the target reads it (sparkmirror.sync.topic.deletions)"
                )
                self.pending.add(topic)
            else:
                then = (
                    f"its remote topic {remote} on {self.clients.flow.target} is left as it is "
                    "(sparkmirror.sync.topic.deletions = true deletes it once it is safe)"
                )
            log.warning(
                "flow=%s source topic %s was deleted on %s: it is no longer copied (mirrored: %s); %s",
                self.flow,
                topic,
                self.clients.flow.source,
                shown,
                then,
            )
            if self.metrics is not None:
                self.metrics.source_topic_deleted(topic)
        return found

    def sync(self) -> None:
        """Delete the remote topics of :attr:`pending` that are safe to delete now (see the module)."""
        for topic in sorted(self.pending):
            remote = self.remote_name(topic)
            why = self._unsafe(topic, remote)
            if why is None:
                self._delete(topic, remote)
            elif why.endswith("for good"):
                self.pending.discard(topic)
                log.warning("flow=%s remote topic %s is kept: %s", self.flow, remote, why)
            else:
                log.info("flow=%s remote topic %s is not deleted yet: %s", self.flow, remote, why)

    def _unsafe(self, topic: str, remote: str) -> str | None:
        """Why ``remote`` must not be deleted now (None: it may)."""
        mirrored = {p: up + n for (t, p), (up, _down, n) in self.store.tails().items() if t == topic}
        ends = {p: end for (t, p), (_next, end) in self.ends.items() if t == topic}
        if not ends or any(end < 0 for end in ends.values()):
            return (
                f"the source end of {topic} was never seen by this process (deleted while the flow did not copy), "
                "so nothing proves every record was mirrored; delete it by hand if it may go: for good"
            )
        short = {p: (mirrored.get(p, 0), end) for p, end in ends.items() if mirrored.get(p, 0) < end}
        if short:
            parts = ", ".join(
                f"[{p}] mirrored up to {m}, the source had up to {e}" for p, (m, e) in sorted(short.items())
            )
            return f"not every record of {topic} was mirrored before it was deleted ({parts}): for good"
        readers = groups_reading(self.clients, remote)
        if readers:
            shown = ", ".join(readers[:5]) + (" …" if len(readers) > 5 else "")
            return (
                f"consumer groups on {self.clients.flow.target} read it ({shown}); looked at again every topic refresh"
            )
        return None

    def _delete(self, topic: str, remote: str) -> None:
        from confluent_kafka import KafkaError, KafkaException

        admin = self.clients.target_admin
        future = admin.delete_topics([remote], operation_timeout=30)[remote]
        try:
            future.result(timeout=60)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if not (isinstance(err, KafkaError) and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
                log.warning(
                    "flow=%s remote topic %s could not be deleted (tried again later): %s", self.flow, remote, exc
                )
                return
        self.pending.discard(topic)
        forgotten = self.store.forget_topic(topic)
        log.warning(
            "flow=%s deleted remote topic %s on %s: its source topic %s was deleted, every record of it was mirrored "
            "and no consumer group reads it (%d offset-map segments forgotten)",
            self.flow,
            remote,
            self.clients.flow.target,
            topic,
            forgotten,
        )
        if self.metrics is not None:
            self.metrics.remote_topic_deleted(topic)


def groups_reading(clients: FlowClients, remote: str) -> list[str]:
    """Consumer groups on the target with a committed offset on ``remote`` or a member assigned to it
    (sparkmirror's own groups aside)."""
    admin = clients.target_admin
    listed = retry_kafka(lambda: admin.list_consumer_groups(request_timeout=30).result(), what="list groups")
    names = sorted(g.group_id for g in listed.valid if not is_own_group(g.group_id))
    if not names:
        return []
    md = retry_kafka(lambda: admin.list_topics(remote, timeout=30), what=f"describe {remote}")
    tmd = md.topics.get(remote)
    partitions = [(remote, p) for p in sorted(tmd.partitions)] if tmd is not None and tmd.error is None else []
    readers = []
    described = admin.describe_consumer_groups(names, request_timeout=30)
    for group in names:
        assigned = False
        try:
            desc = described[group].result(timeout=60)
            assigned = any(
                tp.topic == remote for m in desc.members if m.assignment for tp in m.assignment.topic_partitions
            )
        except Exception as exc:  # noqa: BLE001 - a group not described counts as a reader: never guess
            log.info(
                "flow=%s group %s not described (%s): counted as reading %s", clients.flow.name, group, exc, remote
            )
            assigned = True
        if assigned or (partitions and committed_offsets(clients.target_consumer, group, partitions)):
            readers.append(group)
    return readers
