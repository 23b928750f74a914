"""The ids of the mirrored source topics, kept on the target: a topic deleted and re-created under the
same name is told apart from the one that was mirrored.

Offsets of a re-created topic start again at 0: resumed from the old topic's position, a flow would
skip the new topic's first records (or repeat, or mirror records twice into the remote topic).
Each source topic's id (Kafka's topic UUID) is recorded as the commit metadata of partition 0 of its
remote topic in the group :func:`sparkmirror.core.naming.topic_ids_group` on the target: durable,
per flow, without a topic of its own. The commit is renewed at every check (an empty group's offsets
expire after the broker's ``offsets.retention.minutes``).

Rule: a recorded id that differs from the source's is never overwritten here; only the operator's
``run --reset-topic`` does (:meth:`TopicIds.record`), after the flow forgot the old topic's position.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from sparkmirror.errors import SparkMirrorError
from sparkmirror.kafka.groups import commit_positions, committed_positions
from sparkmirror.kafka.retry import retry_kafka

log = logging.getLogger(__name__)


class TopicRecreated(SparkMirrorError):
    """A source topic's id is not the one mirrored so far: it was deleted and re-created."""

    exit_code = 7


def source_topic_ids(admin: object, topics: Iterable[str]) -> dict[str, str]:
    """``{topic: topic id}`` of the source topics that exist (``admin``: a confluent-kafka AdminClient);
    waits for the answer (at most 30 s)."""
    look = retry_kafka(lambda: TopicIdLook(admin, topics, timeout_s=30), what="describe source topics")
    return look.ids(wait=True)[0]


def recreated_topics(expected: Mapping[str, str], current: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """``(topic, id expected, id now)`` of each topic of ``expected`` that ``current`` gives another id
    (deleted and re-created); a topic missing from ``current`` (gone, or not answered) is not among them."""
    return [(t, tid, current[t]) for t, tid in sorted(expected.items()) if current.get(t, tid) != tid]


class TopicIdLook:
    """One look at source topics' ids, asked at once and read when answered: a caller that must not
    wait (the driver's loop, shared by every flow, while the source does not answer) reads it at a
    later turn, once :meth:`done`."""

    def __init__(self, admin: object, topics: Iterable[str], *, timeout_s: float) -> None:
        from confluent_kafka import TopicCollection
        from confluent_kafka.admin import AdminClient

        assert isinstance(admin, AdminClient)
        names = sorted(set(topics))
        self.futures = admin.describe_topics(TopicCollection(names), request_timeout=timeout_s) if names else {}

    def done(self) -> bool:
        return all(f.done() for f in self.futures.values())

    def ids(self, *, wait: bool = False) -> tuple[dict[str, str], dict[str, str]]:
        """``({topic: id}, {topic: why not})`` of the topics answered (``wait``: of all, waiting for them).
        A topic the source answered "unknown topic" for (deleted, not re-created yet) is in neither: it
        exists under no id now, and a look again finds nothing until it is re-created."""
        from confluent_kafka import KafkaError

        out: dict[str, str] = {}
        failed: dict[str, str] = {}
        for name, fut in self.futures.items():
            if not wait and not fut.done():
                continue
            try:
                out[name] = str(fut.result().topic_id)
            except Exception as exc:  # noqa: BLE001 - not answered, or gone: no id either way
                log.debug("describe %s: %s", name, exc)
                error = exc.args[0] if exc.args else None
                if not (isinstance(error, KafkaError) and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
                    failed[name] = str(exc)
        return out, failed


class TopicIds:
    """Check and record the source topic ids of one flow."""

    def __init__(
        self,
        *,
        flow: str,
        consumer_conf: Mapping[str, str],
        group: str,
        remote_name: Callable[[str], str],
    ) -> None:
        self.flow = flow
        self.consumer_conf = dict(consumer_conf)
        self.group = group
        self.remote_name = remote_name

    def recorded(self, topics: Iterable[str]) -> dict[str, str]:
        """``{source topic: id recorded on the target}`` for those that have one."""
        by_remote = {self.remote_name(t): t for t in topics}
        positions = committed_positions(self.consumer_conf, self.group, [(r, 0) for r in by_remote])
        return {by_remote[r]: meta for (r, _p), (_o, meta) in positions.items() if meta}

    def check(self, current: Mapping[str, str]) -> None:
        """Raise :class:`TopicRecreated` if any topic of ``current`` (``{topic: id}``) has another id on
        record; record the ids of topics seen for the first time, renew the others."""
        recorded = self.recorded(current)
        changed = {t: (was, now) for t, was, now in recreated_topics(recorded, current)}
        if changed:
            topic, (was, now) = sorted(changed.items())[0]
            flags = " ".join(f"--reset-topic {t}" for t in sorted(changed))
            raise TopicRecreated(
                f"flow={self.flow} source topic {topic} was deleted and re-created (topic id was {was}, is now "
                f"{now}){' (also: ' + ', '.join(sorted(changed)[1:]) + ')' if len(changed) > 1 else ''}: resuming "
                "from the old topic's position would skip or repeat records, so the flow stopped. The remote "
                f"topic {self.remote_name(topic)} keeps the old topic's records; to mirror the new topic from its "
                f"beginning, run once with `sparkmirror run <config> {flags}`"
            )
        self.record(current)

    def record(self, ids: Mapping[str, str]) -> None:
        """Record ``{topic: id}`` on the target (overwrites: the caller decided)."""
        if ids:
            commit_positions(self.consumer_conf, self.group, {(self.remote_name(t), 0): (0, i) for t, i in ids.items()})
