"""The driver's side of the JVM writer: one Spark job per round, its rows as :class:`PartitionResult`.

The plan goes to the JVM as JSON (with the clients' secrets: it is never logged, like the pickled
:class:`~sparkmirror.pipeline.executor.plan.WritePlan` of the Python writer); each group of ranges is
one task, and exactly-once ranges name their transactional id. The tasks extend each partition's
last offset-map segment (the plan's tails) as the Python sink does; exactly-once writes those
segments in the data's transactions, so the rows carry them as written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from sparkmirror.core.offsetmap import extend_tail
from sparkmirror.core.ranges import SourceRange
from sparkmirror.kafka.clients import PRODUCER_SAFETY
from sparkmirror.pipeline.executor.plan import WritePlan
from sparkmirror.pipeline.executor.results import PartitionResult
from sparkmirror.pipeline.executor.sources import STALL_TIMEOUT_S

if TYPE_CHECKING:
    from pyspark import SparkContext


#: Partitions a task's Java consumer fetches at a time: it buffers up to ``max.partition.fetch.bytes``
#: for each partition it may fetch, so this bounds a task's heap (64 MiB with Java's 1 MiB default).
FETCH_WINDOW = 64

_IN_FLIGHT = "max.in.flight.requests.per.connection"
#: Java client settings the writer keeps unless the operator sets them (Kafka 4's linger.ms).
_PRODUCER_DEFAULTS = {"linger.ms": "5", "delivery.timeout.ms": "120000"}
#: The source consumer: positions come from Spark's plan, never from a group.
_READER_SETTINGS = {
    "enable.auto.commit": "false",
    "isolation.level": "read_committed",
    "auto.offset.reset": "earliest",
}
#: Reader defaults an operator may override with ``A.consumer.*``: a short fetch wait (the last
#: records of a range do not wait 500 ms); fetch sizes stay Java's, which bound the JVM's heap.
_READER_DEFAULTS = {"fetch.max.wait.ms": "100"}


def java_producer_config(props: Mapping[str, str], flow: str) -> dict[str, str]:
    """The writer's Java producer: the operator's target producer properties with safety on top
    (the librdkafka producer's checks, :func:`~sparkmirror.kafka.clients.producer_config`, have
    already refused settings that would lose or reorder records); the driver caps ``batch.size``
    once the remote topics' limits are known (``TargetPreparer.fit_writer``)."""
    conf = {**_PRODUCER_DEFAULTS, **props}
    conf.update({k: v for k, v in PRODUCER_SAFETY.items() if k not in conf or k != _IN_FLIGHT})
    conf[_IN_FLIGHT] = str(min(int(PRODUCER_SAFETY[_IN_FLIGHT]), int(conf[_IN_FLIGHT])))
    conf.setdefault("client.id", f"sparkmirror-{flow}-jvm")
    return conf


def java_consumer_config(props: Mapping[str, str], flow: str) -> dict[str, str]:
    """The writer's Java consumer of the source: assigned, never a group member."""
    conf = {**_READER_DEFAULTS, **props, **_READER_SETTINGS}
    conf.pop("group.id", None)
    conf.setdefault("client.id", f"sparkmirror-{flow}-jvm-reader")
    return conf


def java_progress_consumer_config(props: Mapping[str, str], flow: str, group: str) -> dict[str, str]:
    """Exactly-once: the writer's Java consumer of the progress group on the target (never joins it;
    reads its committed offsets, stable ones only, and names it in the transactions)."""
    conf = {**props, "group.id": group, "enable.auto.commit": "false", "isolation.level": "read_committed"}
    conf.setdefault("client.id", f"sparkmirror-{flow}-jvm-progress")
    return conf


def plan_json(plan: WritePlan, ranges: list[SourceRange]) -> str:
    """What every task of a round needs (with secrets: never logged)."""
    remotes = {r.topic: plan.remote_topic(r.topic) for r in ranges}
    keys = {(r.topic, r.partition) for r in ranges}
    tails = [[t, p, *plan.tails[(t, p)]] for t, p in sorted(keys) if (t, p) in plan.tails]
    return json.dumps(
        {
            "flow": plan.flow,
            "producer": plan.java_producer_config,
            "consumer": plan.java_consumer_config,
            "remotes": remotes,
            "limits": {t: n for t, n in plan.max_record_bytes.items() if t in remotes.values()},
            "errors_tolerance": plan.errors_tolerance,
            "dead_letter_topic": plan.dead_letter_topic,
            "flush_timeout_ms": int(plan.flush_timeout_s * 1000),
            "stall_timeout_ms": int(STALL_TIMEOUT_S * 1000),
            "test_fail_after_records": plan.test_fail_after_records,
            "test_fail_after_commit": plan.test_fail_after_commit,
            "fetch_window": FETCH_WINDOW,
            "tails": tails,
            "exactly_once": plan.exactly_once,
            "offset_map_topic": plan.offset_map_topic,
            "progress_group": plan.progress_group,
            "progress_consumer": plan.java_progress_consumer_config,
            "generation": plan.producer_generation,
            "transaction_timeout_ms": str(plan.transaction_timeout_ms),
            "target_wait_ms": int(plan.target_wait_s * 1000),
            "writers": plan.writers,
        }
    )


def copy_in_jvm(sc: SparkContext, plan: WritePlan, groups: list[list[SourceRange]]) -> list[PartitionResult]:
    """One Spark job copying ``groups`` (a task each) with the JVM writer; one result per source partition."""
    ranges = [r for g in groups for r in g]
    if not ranges:
        return []
    jvm = sc._jvm
    assert jvm is not None, "the Spark session has stopped"
    copier = jvm.sparkmirror.jvm.RangeCopier
    payload = json.dumps([[_range(r, plan) for r in g] for g in groups])
    rows = json.loads(copier.copy(sc._jsc, plan_json(plan, ranges), payload))
    return [result_from_row(row, plan) for row in rows]


def _range(r: SourceRange, plan: WritePlan) -> list[object]:
    """One range as the JVM reads it; exactly-once adds the transactional id that writes it."""
    if plan.exactly_once:
        return [r.topic, r.partition, r.start, r.until, plan.transactional_id(r.topic, r.partition)]
    return [r.topic, r.partition, r.start, r.until]


def result_from_row(row: Mapping[str, object], plan: WritePlan) -> PartitionResult:
    """A task's JSON row as the Python writer's result; its first segment extends the partition's tail."""
    key = (str(row["topic"]), int(row["partition"]))  # type: ignore[call-overload]
    raw = row["segments"]
    assert isinstance(raw, list)
    segments = extend_tail([(int(u), int(d), int(n)) for u, d, n in raw], plan.tails.get(key))
    return PartitionResult.from_row({**row, "segments": [{"u": u, "d": d, "n": n} for u, d, n in segments]})


def close_clients(sc: SparkContext) -> None:
    """Close the clients the writer keeps between tasks in this JVM (``local`` masters run the tasks
    here; a cluster's executors close theirs when the application ends)."""
    jvm = sc._jvm
    if jvm is not None:
        jvm.sparkmirror.jvm.RangeCopier.closeAll()
