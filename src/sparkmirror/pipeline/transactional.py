"""The exactly-once writer: one transaction per task on the target cluster.

A task writes one source partition's offset range. Its producer's
``transactional.id`` is stable per (flow, source topic, partition), so a
retried, speculative or zombie attempt of the same range is fenced by
``init_transactions``. After that call the task reads the flow's progress for
its partition — the committed offset of the progress group on the remote
topic, which is the next upstream offset still to mirror — and skips the
records below it, so a replayed range is written once. The records, the
dead-lettered ones (``errors.tolerance=all``) and the new progress
(``send_offsets_to_transaction``, KIP-656's idea) are committed together.

The target cluster, not Spark's checkpoint, is therefore the source of truth
for progress: the job starts from it when no checkpoint exists.

What it must never do: commit a transaction while a record of the range is
neither acknowledged nor dead-lettered, or commit progress past a record it
did not write. Any doubt aborts the transaction and fails the task.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

from sparkmirror.kafka.retry import retry_kafka
from sparkmirror.pipeline.writer import (
    WORKER_ID,
    PartitionWrite,
    WriteError,
    WritePlan,
    await_acks,
    finish_segments,
    produce_batch,
    settle_record_failures,
    stats_batches,
)

log = logging.getLogger(__name__)

_CACHE: dict[tuple[str, ...], Any] = {}
_CACHE_LOCK = threading.Lock()
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def transactional_id(plan: WritePlan, topic: str, partition: int) -> str:
    """Stable per (flow, source topic, partition): the fencing key."""
    return f"{plan.transactional_id_prefix}{_UNSAFE.sub('_', topic)}-{partition}"


def _cache_key(kind: str, key: str, plan: WritePlan) -> tuple[str, ...]:
    return (
        kind,
        key,
        str(os.getpid()),
        plan.producer_generation,
        *sorted(f"{k}={v}" for k, v in plan.producer_config.items()),
    )


def _cached(kind: str, key: str, plan: WritePlan, make: Any) -> Any:
    cache_key = _cache_key(kind, key, plan)
    with _CACHE_LOCK:
        obj = _CACHE.get(cache_key)
        if obj is None:
            obj = make()
            _CACHE[cache_key] = obj
        return obj


def _forget(obj: Any) -> None:
    with _CACHE_LOCK:
        for k, v in list(_CACHE.items()):
            if v is obj:
                del _CACHE[k]


def _tx_producer(plan: WritePlan, tid: str, partition: tuple[str, int] | None = None) -> Any:
    """The worker's producer for ``tid``, made (and ``init_transactions``-ed) when needed.

    When the driver says another worker wrote ``partition`` last (``plan.writers``), that
    worker's ``init_transactions`` has fenced the producer cached here: it is replaced before
    use instead of failing the task on its first request.
    """
    from confluent_kafka import Producer

    if partition is not None and plan.writers.get(partition, WORKER_ID) != WORKER_ID:
        _drop_cached("producer", tid, plan)

    def make() -> Any:
        conf = dict(plan.producer_config)
        conf["transactional.id"] = tid
        conf["transaction.timeout.ms"] = str(plan.transaction_timeout_ms)
        conf.setdefault("client.id", f"sparkmirror-{plan.flow}")
        # Connect to the target's brokers at once: with librdkafka's sparse connections,
        # init_transactions often found no broker up and waited for its 500 ms coordinator
        # timer (510 ms against 8 ms measured, docs/performance.md).
        conf.setdefault("enable.sparse.connections", "false")
        p = Producer(conf)
        # Fences any earlier producer with this id and completes (aborts) its
        # open transaction, so the progress read next is stable.
        retry_kafka(lambda: p.init_transactions(60), what=f"init_transactions({tid})")
        return p

    return _cached("producer", tid, plan, make)


def _drop_cached(kind: str, key: str, plan: WritePlan) -> None:
    with _CACHE_LOCK:
        stale = _CACHE.pop(_cache_key(kind, key, plan), None)
    if stale is not None:
        try:
            stale.flush(0)
        except Exception:  # noqa: BLE001 - a fenced producer; it only needs to go
            pass


def _progress_consumer(plan: WritePlan) -> Any:
    from confluent_kafka import Consumer

    def make() -> Any:
        conf = dict(plan.consumer_config)
        conf.update(
            {
                "group.id": plan.progress_group,
                "enable.auto.commit": "false",
                "isolation.level": "read_committed",
            }
        )
        return Consumer(conf)

    return _cached("consumer", plan.progress_group, plan, make)


def committed_progress(plan: WritePlan, remote: str, partition: int) -> int:
    """The next upstream offset to mirror for this partition (-1: none yet)."""
    return committed_progress_many(plan, [(remote, partition)])[(remote, partition)]


def committed_progress_many(plan: WritePlan, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The next upstream offset to mirror per (remote topic, partition) (-1: none yet), in one request."""
    from confluent_kafka import TopicPartition

    consumer = _progress_consumer(plan)
    tps = retry_kafka(
        lambda: consumer.committed([TopicPartition(t, p) for t, p in partitions], timeout=30),
        what=f"reading progress of {len(partitions)} partitions",
    )
    out: dict[tuple[str, int], int] = {}
    for tp in tps:
        if tp.error is not None:
            # Never read an error as "no progress": that would write the range again.
            raise WriteError(
                f"flow={plan.flow} cannot read progress of {tp.topic}[{tp.partition}]: {tp.error}", terminal=False
            )
        out[(tp.topic, tp.partition)] = int(tp.offset) if tp.offset >= 0 else -1
    return out


def finish_transaction(producer: Any, plan: WritePlan, w: PartitionWrite) -> None:
    """Wait for the partition's acks, settle refusals, then commit records, segments and progress (or abort)."""
    one = {(w.topic, w.partition): w}
    await_acks(producer, plan, one)
    refused = settle_record_failures(producer, plan, one)
    if refused or w.last_offset < 0:
        producer.abort_transaction(30)  # refused: the driver stops the flow; nothing of the range commits
        return
    finish_segments(plan, [w])
    _produce_segments(producer, plan, w)
    _commit(producer, plan, w)


def write_exactly_once(batches: Iterator[Any], plan: WritePlan) -> Iterator[Any]:
    """mapInArrow body in exactly-once mode."""
    import pyarrow.compute as pc

    producer: Any = None
    parts: dict[tuple[str, int], PartitionWrite] = {}
    current: tuple[str, int] | None = None
    progress = -1
    skipped = 0
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            topic = batch.column(2)[0].as_py()
            partition = batch.column(3)[0].as_py()
            if current is None:
                current = (topic, partition)
                tid = transactional_id(plan, topic, partition)
                producer = _tx_producer(plan, tid, current)
                progress = committed_progress(plan, plan.remote_topic(topic), partition)
                producer.begin_transaction()
            if (
                pc.count_distinct(batch.column(2)).as_py() != 1
                or pc.count_distinct(batch.column(3)).as_py() != 1
                or (topic, partition) != current
            ):
                raise WriteError(
                    f"flow={plan.flow}: a task received more than one source partition "
                    f"({current[0]}[{current[1]}] and others); exactly-once needs Spark's default of one "
                    "task per Kafka partition (do not set minPartitions or maxRecordsPerPartition)",
                    terminal=True,
                )
            if progress >= 0:
                keep = pc.greater_equal(batch.column(4), progress)
                before = batch.num_rows
                batch = batch.filter(keep)
                skipped += before - batch.num_rows
            produce_batch(producer, batch, plan, parts)
            if plan.test_fail_after_records:
                _test_hook_fail(producer, plan, parts)
        if current is None:
            return
        w = parts.get(current)
        if w is None:
            producer.abort_transaction(30)  # nothing new: every record was below the progress
        else:
            finish_transaction(producer, plan, w)
        if skipped:
            log.info(
                "flow=%s %s[%d] skipped %d records already committed on the target (progress=%d)",
                plan.flow,
                current[0],
                current[1],
                skipped,
                progress,
            )
    except BaseException:
        if producer is not None:
            _abort_quietly(producer)
        raise
    yield from stats_batches(parts.values())


def _test_hook_fail(producer: Any, plan: WritePlan, parts: dict[tuple[str, int], PartitionWrite]) -> None:
    """TEST HOOK: fail the first attempt of a task mid-transaction, records already on the target."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    written = sum(w.records for w in parts.values())
    if ctx is not None and ctx.attemptNumber() == 0 and written >= plan.test_fail_after_records:
        producer.flush(30)
        raise RuntimeError(f"injected task failure after {written} records (test hook)")


def _produce_segments(producer: Any, plan: WritePlan, w: PartitionWrite) -> None:
    """The offset map's segments for this range, inside the data's transaction."""
    if not plan.offset_map_topic:
        return
    now = int(time.time() * 1000)
    for seg in w.segments:
        rec = seg.to_record(now)
        producer.produce(plan.offset_map_topic, key=rec.key_bytes(), value=rec.value_bytes())


def _commit(producer: Any, plan: WritePlan, w: PartitionWrite) -> None:
    from confluent_kafka import KafkaException, TopicPartition

    group_md = _progress_consumer(plan).consumer_group_metadata()
    position = [TopicPartition(w.remote, w.partition, w.last_offset + 1)]
    retry_kafka(
        lambda: producer.send_offsets_to_transaction(position, group_md, 60),
        what=f"send_offsets_to_transaction({w.remote}[{w.partition}])",
    )
    deadline = time.monotonic() + plan.transaction_timeout_ms / 1000
    while True:
        try:
            producer.commit_transaction(60)
            return
        except KafkaException as exc:
            err = exc.args[0]
            # Kafka's rule: a retriable commit error (a timeout) is retried as
            # is; one that requires an abort aborts and replays the range; a
            # fatal one (fenced) never commits.
            if err.retriable() and time.monotonic() < deadline:
                log.warning(
                    "flow=%s %s[%d] commit_transaction: %s; retrying",
                    plan.flow,
                    w.topic,
                    w.partition,
                    err.str(),
                )
                continue
            fenced = "FENCED" in err.name() or err.fatal()
            raise WriteError(
                f"flow={plan.flow} {w.topic}[{w.partition}] offsets {w.first_offset}..{w.last_offset}: "
                f"transaction not committed ({err.name()}: {err.str()}); "
                + ("another writer of this partition took over" if fenced else "the range will be replayed"),
                terminal=False,
            ) from None


def _abort_quietly(producer: Any) -> None:
    try:
        producer.abort_transaction(30)
    except Exception:  # noqa: BLE001 - fatal/fenced producers cannot abort; drop them
        pass
    _forget(producer)
