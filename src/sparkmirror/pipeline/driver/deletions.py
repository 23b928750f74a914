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

1. every record of it the source held was mirrored: for each partition, the copy had read up to the
   source's end (its consumer's position, past transaction markers, at or past the latest end it or
   a topic refresh saw) and the offset map holds every record it read (its next offset to copy); a
   partition whose end was never seen (deleted while the flow did not copy it) keeps the topic for
   good (said). Records appended after the end was last seen and before the deletion cannot be known
   by anyone once the topic is gone: the window is a fetch of the copy for records it read (their
   end is noted at the read), and up to the copy's look at every partition (10 s) for an end that
   rose without a record (transaction markers, an aborted transaction);
2. no consumer group on the target reads it: none has a committed offset on it or a member
   assigned to it (sparkmirror's own groups aside), and every group could be listed and described.

A topic the source answers for with anything but "unknown topic" (an authorization error, a
timeout) is not taken for deleted, at detection and again before its remote topic is deleted.

What it must never do: delete a remote topic whose records a consumer may still need, or mistake a
topic that exists (excluded, hidden by an ACL, or momentarily unlisted) for a deleted one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from sparkmirror.core.naming import is_own_group
from sparkmirror.kafka.flowclients import FlowClients
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
        #: Per partition: (next offset to copy, how far the copy read it) as the copy last reported it,
        #: and the latest source end seen (by the copy or a topic refresh; -1: never).
        self.read: dict[PartitionKey, tuple[int, int]] = {}
        self.ends: dict[PartitionKey, int] = {}

    def positions(self, positions: Mapping[PartitionKey, tuple[int, int, int]]) -> None:
        """The copy's latest (next, source end, read up to) per partition (kept: a topic's end is
        unknowable once it is deleted)."""
        for key, (nxt, end, read) in positions.items():
            self.read[key] = (nxt, read)
            self.ends[key] = max(end, self.ends.get(key, -1))

    def source_ends(self, ends: Mapping[PartitionKey, int]) -> None:
        """Source ends a topic refresh read (ListOffsets)."""
        for key, end in ends.items():
            self.ends[key] = max(end, self.ends.get(key, -1))

    def check(self, topics: Iterable[str], mirrored_before: Iterable[str]) -> list[str]:
        """The topics of ``mirrored_before`` (and of the offset map) gone from the source cluster, said
        and counted once; ``topics``: the source topics the flow copies now. Returns the new ones."""
        current = set(topics)
        known = {t for t, _p in self.store.tails()} | set(mirrored_before)
        gone = sorted(known - current - self.deleted)
        if not gone:
            return []
        # One listing first (a topic left out by the flow's filters is listed), then each unlisted one asked
        # for by name: only the source's "unknown topic" makes it deleted.
        admin = self.clients.source_admin
        listed = retry_kafka(lambda: admin.list_topics(timeout=30), what="list the source topics").topics
        found = [t for t in gone if t not in listed and self._gone(t)]
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

    def _gone(self, topic: str) -> bool:
        """Whether the source cluster says ``topic`` does not exist. Nothing else counts (an ACL that hides
        it answers TOPIC_AUTHORIZATION_FAILED), and the question never creates it: DescribeTopics, not a
        metadata request a broker with ``auto.create.topics.enable`` could answer by creating it."""
        from confluent_kafka import KafkaError, KafkaException, TopicCollection

        admin = self.clients.source_admin
        futures = retry_kafka(
            lambda: admin.describe_topics(TopicCollection([topic]), request_timeout=30), what=f"describe {topic}"
        )
        try:
            futures[topic].result(timeout=60)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            return isinstance(err, KafkaError) and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        except Exception:  # noqa: BLE001 - a timeout or anything else: not known to be gone
            return False
        return False

    def _unsafe(self, topic: str, remote: str) -> str | None:
        """Why ``remote`` must not be deleted now (None: it may)."""
        if not self._gone(topic):
            return f"source topic {topic} exists again (or cannot be described): for good"
        mirrored = {p: up + n for (t, p), (up, _down, n) in self.store.tails().items() if t == topic}
        parts = {p for (t, p) in self.ends if t == topic} | {p for (t, p) in self.read if t == topic}
        unseen = sorted(p for p in parts if self.ends.get((topic, p), -1) < 0 or (topic, p) not in self.read)
        if not parts or unseen:
            return (
                f"the source end of {topic} {unseen or ''} was never seen by this process (deleted while the flow "
                "did not copy it), so nothing proves every record was mirrored; delete it by hand if it may go: "
                "for good"
            )
        short = []
        for p in sorted(parts):
            nxt, read = self.read[(topic, p)]
            end = self.ends[(topic, p)]
            if read < end or mirrored.get(p, 0) < nxt:
                short.append(f"[{p}] read up to {read} and mirrored up to {mirrored.get(p, 0)} of {end}")
        if short:
            return f"not every record of {topic} was mirrored before it was deleted ({', '.join(short)}): for good"
        readers = groups_reading(self.clients, remote)
        if readers:
            shown = ", ".join(readers[:5]) + (" …" if len(readers) > 5 else "")
            target = self.clients.flow.target
            return f"consumer groups on {target} read it ({shown}); looked at again every topic refresh"
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
    (sparkmirror's own groups aside). Every group's description and offsets are asked for at once (a
    target shared with many applications has hundreds of groups); a group that does not answer counts
    as a reader: never guess."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicCollection, TopicPartition

    admin = clients.target_admin
    listed = retry_kafka(lambda: admin.list_consumer_groups(request_timeout=30).result(), what="list groups")
    if listed.errors:  # a broker that did not answer may know groups that read it
        return [f"(groups not listed: {listed.errors[0]})"]
    names = sorted(g.group_id for g in listed.valid if not is_own_group(g.group_id))
    if not names:
        return []
    described = retry_kafka(
        lambda: admin.describe_topics(TopicCollection([remote]), request_timeout=30), what=f"describe {remote}"
    )
    try:
        partitions = [TopicPartition(remote, p.id) for p in described[remote].result(timeout=60).partitions]
    except Exception:  # noqa: BLE001 - gone already: no group can read it
        return []
    groups = admin.describe_consumer_groups(names, request_timeout=30)
    offsets = {
        g: admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g, partitions)], request_timeout=30)[g]
        for g in names
    }
    readers = []
    for group in names:
        try:
            desc = groups[group].result(timeout=60)
            assigned = any(
                tp.topic == remote for m in desc.members if m.assignment for tp in m.assignment.topic_partitions
            )
            committed = any(
                tp.error is None and tp.offset >= 0 for tp in offsets[group].result(timeout=60).topic_partitions or []
            )
        except Exception as exc:  # noqa: BLE001 - a group that does not answer counts as a reader
            log.info("flow=%s group %s not described (%s): counted as a reader", clients.flow.name, group, exc)
            assigned, committed = True, True
        if assigned or committed:
            readers.append(group)
    return readers
