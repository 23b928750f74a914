"""The direct reader: a task copies its planned offset ranges from the source to the target.

Spark's Kafka source plans each micro-batch (``[from, until)`` per source
partition, see :mod:`sparkmirror.pipeline.ranges`); the job shares the ranges
out among at most as many tasks as it has cores (:func:`sparkmirror.core.ranges.task_count`,
:func:`sparkmirror.core.ranges.share_out`).
Each task reads its ranges with one librdkafka consumer (``read_committed``)
and produces every record to the same partition of the remote topic with its
key, value, headers and timestamp, exactly as the Arrow writer does. Reading in
the task instead of through Spark's JVM consumer, Arrow and the worker socket
cut the CPU per record by about three (docs/performance.md).

The rules are the writer's (:mod:`sparkmirror.pipeline.writer`): a task returns
only when every record of its ranges is acknowledged, dead-lettered or reported
as refused; in exactly-once mode each partition's records, offset-map segments
and progress commit in one transaction of that partition's transactional id,
and records below the progress already committed on the target are not read.

A range is complete when the consumer has handed over its record at
``until - 1``, or a record at or past ``until``, or reported the partition's end
at or past ``until`` (the range may end on a transaction marker or aborted
records, which a ``read_committed`` consumer never hands over).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sparkmirror.core.ranges import SourceRange
from sparkmirror.pipeline.writer import (
    _BATCH_OVERHEAD,
    _HEADER_OVERHEAD,
    _RECORD_OVERHEAD,
    PartitionWrite,
    WriteError,
    WritePlan,
    _local_refusal,
    keep_zip_directories,
    record_size,
    stats_rows,
    write_at_least_once,
)

log = logging.getLogger(__name__)

#: Messages asked of the consumer per call.
_CONSUME_BATCH = 10_000
#: Partitions whose transactions one task finishes at the same time.
_MAX_COMMIT_THREADS = 8
#: Longest wait of one consume call when fewer messages than asked for are there (transaction
#: markers, compacted or aborted records leave fewer records than offsets).
_CONSUME_WAIT_S = 0.1
#: A range that gets no record (nor its end) for this long fails the task, which is retried.
STALL_TIMEOUT_S = 120.0

#: Source consumer settings the reader owns: positions come from Spark's plan, never from a group.
READER_SETTINGS = {
    "enable.auto.commit": "false",
    "enable.auto.offset.store": "false",
    "isolation.level": "read_committed",
    "auto.offset.reset": "earliest",
    "enable.partition.eof": "true",
}
#: Defaults an operator may override with ``A.consumer.*`` (measured in docs/performance.md):
#: 10 MiB per partition and fetch (librdkafka: 1 MiB) took 1M records from 168k to 216k records/s;
#: librdkafka's own pre-fetch queue (``queued.max.messages.kbytes``, 64 MiB) is kept, 16 MiB
#: cut the rate by 2.3.
READER_DEFAULTS: dict[str, str] = {
    "max.partition.fetch.bytes": "10485760",
    "fetch.wait.max.ms": "100",
}

_CONSUMERS: dict[tuple[str, ...], Any] = {}
_CONSUMERS_LOCK = threading.Lock()


def reader_config(plan: WritePlan) -> dict[str, str]:
    conf = {**READER_DEFAULTS, **plan.source_consumer_config, **READER_SETTINGS}
    conf["group.id"] = f"__sparkmirror.reader.{plan.flow}"  # never joined, never committed to
    conf.setdefault("client.id", f"sparkmirror-{plan.flow}-reader")
    return conf


def _consumer(plan: WritePlan) -> Any:
    """One source consumer per Python worker and configuration (Spark reuses workers)."""
    from confluent_kafka import Consumer

    conf = reader_config(plan)
    key = (plan.flow, str(os.getpid()), *sorted(f"{k}={v}" for k, v in conf.items()))
    with _CONSUMERS_LOCK:
        c = _CONSUMERS.get(key)
        if c is None:
            c = _CONSUMERS[key] = Consumer(conf)
        return c


def _discard_consumer(consumer: Any) -> None:
    with _CONSUMERS_LOCK:
        for k, v in list(_CONSUMERS.items()):
            if v is consumer:
                del _CONSUMERS[k]
    try:
        consumer.close()
    except Exception:  # noqa: BLE001 - best effort on a consumer that failed
        pass


class _Range:
    """One range being copied: where it ends and where its records go."""

    __slots__ = ("r", "w", "producer", "limit", "local_refusals")

    def __init__(self, r: SourceRange, w: PartitionWrite, producer: Any, limit: int | None) -> None:
        self.r = r
        self.w = w
        self.producer = producer
        self.limit = limit
        self.local_refusals = 0


def copy_task(groups: Iterator[list[SourceRange]], plan: WritePlan) -> Iterator[dict[str, Any]]:
    """``mapPartitions`` body: copy each group of ranges handed to this task, yield its result rows."""
    keep_zip_directories()
    for ranges in groups:
        yield from copy_ranges(ranges, plan)


def copy_ranges(ranges: list[SourceRange], plan: WritePlan) -> list[dict[str, Any]]:
    """Copy ``ranges`` to the target; the rows say what was written (see ``RESULT_SCHEMA``)."""
    if plan.exactly_once:
        return _copy_exactly_once(ranges, plan)

    def fill(producer: Any, parts: dict[tuple[str, int], PartitionWrite]) -> None:
        _copy(_consumer(plan), ranges, plan, lambda _r: producer, parts)

    return stats_rows(write_at_least_once(plan, fill))


def _copy_exactly_once(ranges: list[SourceRange], plan: WritePlan) -> list[dict[str, Any]]:
    from sparkmirror.pipeline.transactional import (
        _abort_quietly,
        _tx_producer,
        committed_progress_many,
        finish_transaction,
        transactional_id,
    )

    producers: dict[tuple[str, int], Any] = {}
    open_tx: dict[tuple[str, int], Any] = {}
    parts: dict[tuple[str, int], PartitionWrite] = {}
    todo: list[SourceRange] = []
    try:
        for r in ranges:
            key = (r.topic, r.partition)
            producers[key] = _tx_producer(plan, transactional_id(plan, r.topic, r.partition), key)
        # After init_transactions (fencing earlier writers): one request for every partition's progress.
        progress = committed_progress_many(plan, [(plan.remote_topic(r.topic), r.partition) for r in ranges])
        for r in ranges:
            key = (r.topic, r.partition)
            done = progress[(plan.remote_topic(r.topic), r.partition)]
            start = max(r.start, done)
            if done > r.start:
                log.info(
                    "flow=%s %s[%d] skipping offsets %d..%d, already committed on the target (progress=%d)",
                    plan.flow,
                    r.topic,
                    r.partition,
                    r.start,
                    min(done, r.until) - 1,
                    done,
                )
            if start >= r.until:
                continue
            producers[key].begin_transaction()
            open_tx[key] = producers[key]
            todo.append(SourceRange(r.topic, r.partition, start, r.until))
        if todo:
            _copy(_consumer(plan), todo, plan, lambda r: producers[(r.topic, r.partition)], parts)
        # Each partition's transaction waits on its own round trips (flush, offsets, commit):
        # finish them side by side, not one after another.
        workers = max(1, min(len(parts), _MAX_COMMIT_THREADS))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sparkmirror-commit") as pool:
            futures = {key: pool.submit(finish_transaction, producers[key], plan, w) for key, w in parts.items()}
            failures: list[BaseException] = []
            for key, future in futures.items():
                try:
                    future.result()
                    del open_tx[key]
                except BaseException as exc:  # noqa: BLE001 - re-raised below, after every partition settled
                    failures.append(exc)
            for other in failures[1:]:
                log.error("flow=%s %s", plan.flow, other)
            if failures:
                raise failures[0]
    except BaseException:
        for producer in open_tx.values():
            _abort_quietly(producer)
        raise
    return stats_rows(parts.values())


def _copy(
    consumer: Any,
    ranges: Iterable[SourceRange],
    plan: WritePlan,
    producer_for: Callable[[SourceRange], Any],
    parts: dict[tuple[str, int], PartitionWrite],
) -> None:
    """Read every range to its end and hand each record to its producer (acks come later)."""
    from confluent_kafka import KafkaError, TopicPartition

    state: dict[tuple[str, int], _Range] = {}
    for r in ranges:
        remote = plan.remote_topic(r.topic)
        w = parts[(r.topic, r.partition)] = PartitionWrite(r.topic, remote, r.partition)
        state[(r.topic, r.partition)] = _Range(r, w, producer_for(r), plan.max_record_bytes.get(remote))
    if not state:
        return
    active = dict(state)
    hook = plan.test_fail_after_records
    try:
        consumer.incremental_assign([TopicPartition(t, p, s.r.start) for (t, p), s in state.items()])
        last_progress = time.monotonic()
        while active:
            # librdkafka's batch consume returns when it has as many messages as asked for, or at
            # its timeout: ask for no more than the ranges can still hold (partition ends count as
            # messages), so the last records of a range do not wait for the timeout.
            want = sum(s.r.until - _next(s) for s in active.values())
            msgs = consumer.consume(max(1, min(_CONSUME_BATCH, want)), _CONSUME_WAIT_S)
            if time.monotonic() - last_progress > STALL_TIMEOUT_S:
                _stalled(plan, active)
            done: list[tuple[str, int]] = []
            moved = False
            for m in msgs:
                err = m.error()
                s = active.get((m.topic(), m.partition()))
                if s is None:
                    if err is not None and err.code() != KafkaError._PARTITION_EOF:
                        _client_error(plan, err)  # not about one partition: raises if fatal, else logs
                    continue  # a partition already complete (or fetched for an earlier task)
                offset = m.offset()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if offset >= s.r.until:
                            done.append((s.r.topic, s.r.partition))
                            del active[(s.r.topic, s.r.partition)]
                        continue
                    # Also UNKNOWN_TOPIC_OR_PART: the batch is replayed, and Spark leaves a deleted
                    # topic out when it plans the replay again (failOnDataLoss=false).
                    raise WriteError(
                        f"flow={plan.flow} {s.r.topic}[{s.r.partition}] offset={_next(s)}: reading the source "
                        f"failed ({err.name()}: {err.str()}); the batch will be replayed",
                        terminal=False,
                    )
                if offset >= s.r.until:
                    done.append((s.r.topic, s.r.partition))
                    del active[(s.r.topic, s.r.partition)]
                    continue
                if offset < _next(s):
                    continue  # fetched for an earlier assignment of this partition, or handed over again
                _produce_one(plan, s, m, offset)
                moved = True
                if offset + 1 >= s.r.until:
                    done.append((s.r.topic, s.r.partition))
                    del active[(s.r.topic, s.r.partition)]
            if moved or done:
                last_progress = time.monotonic()
            if done:
                consumer.incremental_unassign([TopicPartition(t, p) for t, p in done])
            for s in state.values():
                s.producer.poll(0)
            if hook:
                _test_hook_fail(state.values(), hook)
    except BaseException:
        _discard_consumer(consumer)
        raise
    if active:
        consumer.incremental_unassign([TopicPartition(t, p) for t, p in active])
    for s in state.values():
        s.w.records = len(s.w.sent) + s.local_refusals


def _next(s: _Range) -> int:
    """The next offset the range can take: one past the last record handed over, or its start."""
    return s.w.last_offset + 1 if s.w.last_offset >= 0 else s.r.start


def _client_error(plan: WritePlan, err: Any) -> None:
    """An error of the consumer as a whole (connection, authentication): fatal ones fail the task."""
    from confluent_kafka import KafkaError

    fatal = {
        KafkaError._AUTHENTICATION,
        KafkaError._SSL,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    }
    if err.fatal() or err.code() in fatal:
        raise WriteError(
            f"flow={plan.flow}: the source consumer failed ({err.name()}: {err.str()}); the batch will be replayed",
            terminal=False,
        )
    log.warning("flow=%s source consumer: %s: %s", plan.flow, err.name(), err.str())


def _produce_one(plan: WritePlan, s: _Range, m: Any, offset: int) -> None:
    """The hot path: one record to the producer."""
    w = s.w
    key = m.key()
    value = m.value()
    headers = m.headers()
    ts = m.timestamp()[1]
    n = (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
    if w.first_offset < 0:
        w.first_offset = offset
    w.last_offset = offset
    w.bytes += n
    if ts > w.max_ts:
        w.max_ts = ts
    if s.limit is not None and _may_exceed(n, headers, s.limit) and record_size(key, value, headers) > s.limit:
        # The target would refuse it, and every record batched with it: settle it on its own.
        reason = f"MSG_SIZE_TOO_LARGE: larger than max.message.bytes={s.limit}"
        w.record_failures.append((offset, (key, value, headers, ts if ts > 0 else None), reason))
        s.local_refusals += 1
        return
    producer = s.producer
    while True:
        try:
            producer.produce(
                w.remote,
                value,
                key,
                partition=w.partition,
                timestamp=ts if ts > 0 else 0,
                headers=headers,
                on_delivery=w.delivered,
            )
            break
        except BufferError:
            producer.poll(0.05)  # the local queue is full: serve delivery reports until it fits
        except Exception as exc:  # noqa: BLE001 - KafkaException from a local check
            if _local_refusal(plan, w, exc, offset, (key, value, headers, ts if ts > 0 else None)):
                s.local_refusals += 1
                return
            raise
    w.sent.append(offset)


def _may_exceed(n: int, headers: Any, limit: int) -> bool:
    """A cheap upper bound of :func:`record_size` against ``limit`` (a header name is at most 4 bytes a character)."""
    est = n + _BATCH_OVERHEAD + _RECORD_OVERHEAD
    if headers is not None:
        for hk, hv in headers:
            est += _HEADER_OVERHEAD + 4 * len(hk) + (len(hv) if hv is not None else 0)
    return est > limit


def _stalled(plan: WritePlan, active: dict[tuple[str, int], _Range]) -> None:
    s = next(iter(active.values()))
    raise WriteError(
        f"flow={plan.flow} {s.r.topic}[{s.r.partition}]: no record from the source at offset {_next(s)} "
        f"(range ends at {s.r.until}) for {STALL_TIMEOUT_S:.0f}s; the batch will be replayed",
        terminal=False,
    )


def _test_hook_fail(states: Iterable[_Range], after: int) -> None:
    """TEST HOOK: fail the first attempt of a task once it has handed ``after`` records to producers."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    states = list(states)
    written = sum(len(s.w.sent) for s in states)
    if ctx is not None and ctx.attemptNumber() == 0 and written >= after:
        for s in states:
            s.producer.flush(30)
        raise RuntimeError(f"injected task failure after {written} records (test hook)")
