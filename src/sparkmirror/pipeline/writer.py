"""The writer: runs inside Spark's executors and produces records to the target.

Spark's Kafka source hands each task one source partition's offset range, in
offset order, as Arrow batches. The writer produces every record to the same
partition of the remote topic with its key, value, headers and timestamp, then
waits until the target has acknowledged every one of them. Only then does the
task return, and only when every task of the micro-batch has returned does
Spark commit the batch's source offsets: that is the "no data loss" rule.

What it must never do: return normally while a record of its range is neither
acknowledged by the target nor (with ``errors.tolerance=all``) written to the
dead-letter topic. Any other outcome raises, the micro-batch fails and is
replayed from the last committed offsets.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sparkmirror.errors import SparkMirrorError

log = logging.getLogger(__name__)

#: Columns the job selects from Spark's Kafka source, in this order.
INPUT_COLUMNS = (
    "key",
    "value",
    "topic",
    "partition",
    "offset",
    "unix_millis(timestamp) AS timestamp_ms",
    "headers",
)

#: One row per (task, source partition): what the task wrote.
RESULT_SCHEMA = (
    "topic string, partition int, records long, bytes long, "
    "first_offset long, last_offset long, first_target_offset long, last_target_offset long, "
    "dead_lettered long, max_timestamp_ms long, error string, "
    "segments array<struct<u:bigint,d:bigint,n:bigint>>, writer string"
)

#: This Python worker, as the result rows name it (exactly-once producers are per worker).
WORKER_ID = f"{socket.gethostname()}:{os.getpid()}"

#: Marker the driver looks for in a failed batch's error text.
TERMINAL_MARKER = "[sparkmirror:terminal]"

# librdkafka error names that reject one record for good: retrying the same
# record cannot succeed. Everything else fails the batch, which is replayed.
_RECORD_ERRORS = frozenset(
    {
        "MSG_SIZE_TOO_LARGE",
        "_MSG_SIZE_TOO_LARGE",
        "RECORD_LIST_TOO_LARGE",
        "INVALID_RECORD",
        "INVALID_TIMESTAMP",
        "CORRUPT_MESSAGE",
        "TOPIC_AUTHORIZATION_FAILED",
        "CLUSTER_AUTHORIZATION_FAILED",
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        "POLICY_VIOLATION",
    }
)
_AUTHORIZATION = frozenset({"TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED"})

# Kafka Connect's dead-letter header names, so existing tooling reads them.
DLQ_HEADER_PREFIX = "__connect.errors."


class WriteError(SparkMirrorError):
    """A record could not be written; names topic, partition and offset."""

    def __init__(self, message: str, *, terminal: bool) -> None:
        super().__init__((TERMINAL_MARKER + " " if terminal else "") + message)
        self.retriable = not terminal

    def __reduce__(self) -> tuple[Any, ...]:
        msg = self.args[0].removeprefix(TERMINAL_MARKER + " ")
        return (_rebuild_write_error, (msg, not self.retriable))


def _rebuild_write_error(message: str, terminal: bool) -> WriteError:
    return WriteError(message, terminal=terminal)


@dataclass(frozen=True)
class WritePlan:
    """Everything a task needs; pickled to the executors with the function.

    ``producer_config`` holds credentials: it is never logged or printed.
    """

    flow: str
    source_alias: str
    policy: Any
    producer_config: dict[str, str] = field(repr=False)
    errors_tolerance: str = "none"
    dead_letter_topic: str = ""
    flush_timeout_s: float = 300.0
    #: max.message.bytes of each remote topic, as the target reported it.
    max_record_bytes: dict[str, int] = field(default_factory=dict)
    #: Compacted topic on the target holding the offset map's segments.
    offset_map_topic: str = ""
    #: Last segment (upstream start, downstream start, count) per source
    #: partition when the batch was planned: a batch that continues it extends
    #: it (same key) instead of adding a segment.
    tails: dict[tuple[str, int], tuple[int, int, int]] = field(default_factory=dict)
    #: Exactly-once: records, segments and progress in one transaction per task.
    exactly_once: bool = False
    #: Group on the target whose committed offsets (on the remote topics) are
    #: the flow's source progress: the next upstream offset to mirror.
    progress_group: str = ""
    transactional_id_prefix: str = ""
    #: librdkafka config of a consumer on the target (reads the progress).
    consumer_config: dict[str, str] = field(default_factory=dict, repr=False)
    #: librdkafka config of a consumer on the source (the direct reader reads the planned ranges).
    source_consumer_config: dict[str, str] = field(default_factory=dict, repr=False)
    transaction_timeout_ms: int = 300_000
    #: Changes whenever the driver fences the flow's transactional ids, so
    #: executors build new producers instead of reusing fenced ones.
    producer_generation: str = ""
    #: Exactly-once: the worker (:data:`WORKER_ID`) that wrote each source partition last, as the
    #: driver saw in the result rows; another worker's producer for it has been fenced since.
    writers: dict[tuple[str, int], str] = field(default_factory=dict)
    #: TEST HOOK (tests only, from $SPARKMIRROR_TEST_FAIL_AFTER_RECORDS): the first
    #: attempt of every task fails after writing this many records.
    test_fail_after_records: int = 0

    def remote_topic(self, topic: str) -> str:
        return str(self.policy.format_remote_topic(self.source_alias, topic))


# Kafka's record batch header is 61 bytes; a record adds a few varints and
# its attributes. Over-estimating by a little only moves the edge case from
# the broker's refusal to ours, which is cheaper and names the offset.
_BATCH_OVERHEAD = 61
_RECORD_OVERHEAD = 21
_HEADER_OVERHEAD = 10


Headers = list[tuple[str, bytes | None]]


def record_size(key: bytes | None, value: bytes | None, headers: Headers | None) -> int:
    """An upper estimate of a record's size in a batch of its own, in bytes."""
    size = _BATCH_OVERHEAD + _RECORD_OVERHEAD + (len(key) if key else 0) + (len(value) if value else 0)
    for hk, hv in headers or ():
        size += _HEADER_OVERHEAD + len(hk.encode()) + (len(hv) if hv else 0)
    return size


# Producers are reused across tasks in the same Python worker (Spark reuses
# workers), which saves a connection set-up per task and partition.
_PRODUCERS: dict[tuple[str, ...], Any] = {}
_PRODUCERS_LOCK = threading.Lock()


def _producer(plan: WritePlan) -> Any:
    from confluent_kafka import Producer

    key = (plan.flow, str(os.getpid()), *sorted(f"{k}={v}" for k, v in plan.producer_config.items()))
    with _PRODUCERS_LOCK:
        p = _PRODUCERS.get(key)
        if p is None:
            conf = dict(plan.producer_config)
            conf.setdefault("client.id", f"sparkmirror-{plan.flow}")
            p = Producer(conf)
            _PRODUCERS[key] = p
        return p


def _discard_producer(producer: Any) -> None:
    """Forget a producer after a failure; drop what it still queues (the batch replays)."""
    try:
        producer.purge()
        producer.flush(0)
    except Exception:  # noqa: BLE001 - best effort on a failed producer
        pass
    with _PRODUCERS_LOCK:
        for k, v in list(_PRODUCERS.items()):
            if v is producer:
                del _PRODUCERS[k]


class PartitionWrite:
    """Bookkeeping for one source partition within one task."""

    __slots__ = (
        "topic",
        "remote",
        "partition",
        "records",
        "bytes",
        "first_offset",
        "last_offset",
        "failure",
        "record_failures",
        "dead_lettered",
        "max_ts",
        "refusal",
        "sent",
        "failed",
        "ds",
        "segments",
    )

    def __init__(self, topic: str, remote: str, partition: int) -> None:
        self.topic = topic
        self.remote = remote
        self.partition = partition
        self.records = 0
        self.bytes = 0
        self.first_offset = -1
        self.last_offset = -1
        self.failure: tuple[int, str, str] | None = None
        self.record_failures: list[tuple[int, Any, str]] = []
        self.dead_lettered = 0
        self.max_ts = -1
        #: A terminal refusal (errors.tolerance=none): the driver stops the flow.
        self.refusal: str | None = None
        #: Upstream offset of every record handed to the producer, in produce order.
        self.sent: list[int] = []
        #: Indexes into ``sent`` of the records whose delivery failed.
        self.failed: list[int] = []
        #: Target offset of every acknowledged record, in report (= produce) order.
        self.ds: list[int] = []
        #: Offset-map segments of what this task wrote (see finish_segments).
        self.segments: list[Any] = []

    @property
    def pending(self) -> int:
        """Records handed to the producer whose delivery report has not arrived yet."""
        return len(self.sent) - len(self.ds) - len(self.failed)

    @property
    def first_target(self) -> int:
        return self.ds[0] if self.ds else -1

    @property
    def last_target(self) -> int:
        return self.ds[-1] if self.ds else -1

    def acknowledged(self) -> list[int]:
        """Upstream offsets of the acknowledged records, paired index by index with ``ds``."""
        if not self.failed:
            return self.sent[: len(self.ds)]
        failed = set(self.failed)
        return [u for i, u in enumerate(self.sent) if i not in failed]

    def delivered(self, err: Any, msg: Any) -> None:
        """The producer's delivery report for this partition's next record (the hot path).

        librdkafka reports the records of one partition in the order they were produced (the
        idempotent producer keeps that order through retries), so the n-th report belongs to
        ``sent[n]``: one bound method serves every record, no closure per record, and a success
        costs one append. :func:`check_report_order` verifies the assumption on every task:
        offsets the target assigned must rise in report order.
        """
        if err is None:
            self.ds.append(msg.offset())
        else:
            self._failed(err, msg)

    def _failed(self, err: Any, msg: Any) -> None:
        index = len(self.ds) + len(self.failed)
        self.failed.append(index)
        upstream = self.sent[index]
        name = err.name()
        if name in _RECORD_ERRORS:
            ts = msg.timestamp()[1]
            record = (msg.key(), msg.value(), msg.headers(), ts if ts > 0 else None)
            self.record_failures.append((upstream, record, f"{name}: {err.str()}"))
        elif self.failure is None or upstream < self.failure[0]:
            self.failure = (upstream, name, err.str())


def check_report_order(plan: WritePlan, parts: Iterable[PartitionWrite]) -> None:
    """Offsets the target assigned to one producer's records of a partition rise in produce order;
    if the delivery reports disagree, reports were not in produce order and pairing them with
    upstream offsets would corrupt the offset map: fail the batch (it is replayed) instead."""
    for w in parts:
        ds = w.ds
        if any(b <= a for a, b in zip(ds, ds[1:], strict=False)):
            raise WriteError(
                f"flow={plan.flow} {w.topic}[{w.partition}] offsets {w.first_offset}..{w.last_offset}: "
                f"delivery reports for {w.remote}[{w.partition}] arrived out of produce order; "
                "the batch will be replayed",
                terminal=False,
            )


def keep_zip_directories() -> None:
    """Stop PySpark's Python workers from re-reading every zip on their path before each task.

    PySpark calls ``importlib.invalidate_caches()`` at the start of every task; on Python 3.11
    each ``zipimporter`` then re-reads its archive's whole directory, and a worker holds one per
    package imported from ``pyspark.zip``, the py4j zip and the spark-core jar: 76 ms per task
    measured here (docs/performance.md), 0.3-0.7 s of CPU per micro-batch whatever its size.
    Those archives do not change while a worker lives (a file added to the job later is a new
    path with its own importer), so keeping what was read is safe. Idempotent; called in the
    executors only (first thing in a task).
    """
    import zipimport

    current = zipimport.zipimporter.invalidate_caches
    if getattr(current, "_sparkmirror_keeps", False):
        return

    def keep(self: Any) -> None:
        return None

    keep._sparkmirror_keeps = True  # type: ignore[attr-defined]
    zipimport.zipimporter.invalidate_caches = keep  # type: ignore[method-assign]


def write_arrow_batches(batches: Iterator[Any], plan: WritePlan) -> Iterator[Any]:
    """mapInArrow body: produce every row, wait for every ack, yield stats."""
    keep_zip_directories()
    if plan.exactly_once:
        from sparkmirror.pipeline.transactional import write_exactly_once

        yield from write_exactly_once(batches, plan)
        return

    def fill(producer: Any, parts: dict[tuple[str, int], PartitionWrite]) -> None:
        for batch in batches:
            produce_batch(producer, batch, plan, parts)

    yield from stats_batches(write_at_least_once(plan, fill))


def write_at_least_once(
    plan: WritePlan, fill: Callable[[Any, dict[tuple[str, int], PartitionWrite]], None]
) -> list[PartitionWrite]:
    """At-least-once: ``fill`` hands records to the worker's producer; return once every one is
    acknowledged or settled (dead-lettered, or a refusal), with each partition's segments."""
    producer = _producer(plan)
    parts: dict[tuple[str, int], PartitionWrite] = {}
    try:
        fill(producer, parts)
        await_acks(producer, plan, parts)
        settle_record_failures(producer, plan, parts)
    except BaseException:
        # A producer that failed mid-way may hold undelivered records for the
        # replayed batch to duplicate needlessly; start the retry afresh.
        _discard_producer(producer)
        raise
    finish_segments(plan, parts.values())
    return list(parts.values())


def finish_segments(plan: WritePlan, parts: Iterable[PartitionWrite]) -> None:
    """Turn each partition's acknowledged (upstream, downstream) pairs into segments."""
    from sparkmirror.core.offsetmap import Segment, segments_from_offsets

    parts = list(parts)
    check_report_order(plan, parts)
    for w in parts:
        us = w.acknowledged()
        if not us:
            w.segments = []
            continue
        order = sorted(range(len(us)), key=us.__getitem__)
        segs = segments_from_offsets(w.topic, w.partition, [us[i] for i in order], [w.ds[i] for i in order])
        tail = plan.tails.get((w.topic, w.partition))
        if segs and tail is not None:
            u0, d0, n0 = tail
            first = segs[0]
            if u0 + n0 == first.upstream_start and d0 + n0 == first.downstream_start:
                segs[0] = Segment(w.topic, w.partition, u0, d0, n0 + first.count)
        w.segments = segs


def stats_batches(parts: Iterable[PartitionWrite]) -> Iterator[Any]:
    """The task's result rows as Arrow: one per source partition it wrote."""
    import pyarrow as pa

    rows = stats_rows(parts)
    if rows:
        yield pa.RecordBatch.from_pylist(rows, schema=_result_arrow_schema())


def stats_rows(parts: Iterable[PartitionWrite]) -> list[dict[str, Any]]:
    """The task's result rows (fields of :data:`RESULT_SCHEMA`): one per source partition it wrote."""
    return [
        {
            "topic": w.topic,
            "partition": w.partition,
            "records": w.records,
            "bytes": w.bytes,
            "first_offset": w.first_offset,
            "last_offset": w.last_offset,
            "first_target_offset": w.first_target,
            "last_target_offset": w.last_target,
            "dead_lettered": w.dead_lettered,
            "max_timestamp_ms": w.max_ts,
            "error": w.refusal,
            "segments": [{"u": g.upstream_start, "d": g.downstream_start, "n": g.count} for g in w.segments],
            "writer": WORKER_ID,
        }
        for w in parts
    ]


def _result_arrow_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("records", pa.int64()),
            ("bytes", pa.int64()),
            ("first_offset", pa.int64()),
            ("last_offset", pa.int64()),
            ("first_target_offset", pa.int64()),
            ("last_target_offset", pa.int64()),
            ("dead_lettered", pa.int64()),
            ("max_timestamp_ms", pa.int64()),
            ("error", pa.string()),
            ("segments", pa.list_(pa.struct([("u", pa.int64()), ("d", pa.int64()), ("n", pa.int64())]))),
            ("writer", pa.string()),
        ]
    )


def _runs(batch: Any) -> list[tuple[int, int, str, int]]:
    """``(start, end, topic, partition)`` row ranges of one source partition each.

    Spark's Kafka source gives a task one partition, so one run is the rule; the general case is
    kept for sources configured with ``minPartitions``.
    """
    import pyarrow.compute as pc

    n = batch.num_rows
    topics, partitions = batch.column(2), batch.column(3)
    if pc.count_distinct(topics).as_py() == 1 and pc.count_distinct(partitions).as_py() == 1:
        return [(0, n, topics[0].as_py(), partitions[0].as_py())]
    runs: list[tuple[int, int, str, int]] = []
    tl, pl = topics.to_pylist(), partitions.to_pylist()
    start = 0
    for i in range(1, n + 1):
        if i == n or tl[i] != tl[start] or pl[i] != pl[start]:
            runs.append((start, i, tl[start], pl[start]))
            start = i
    return runs


def _headers(column: Any) -> list[Headers | None]:
    """Each row's headers as the producer takes them, from Arrow's list<struct<key, value>>."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(column)
    if column.null_count == n:
        return [None] * n
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    offsets = column.offsets.to_pylist()
    flat = column.values  # every row's entries, concatenated
    keys = flat.field(0).to_pylist()
    values = flat.field(1).to_pylist()
    pairs = list(zip(keys, values, strict=True))
    if column.null_count == 0 and pc.min_max(column.value_lengths()).as_py() == {"min": 1, "max": 1}:
        return [[pair] for pair in pairs]  # one header per record: no slicing
    valid = column.is_valid().to_pylist()
    out: list[Headers | None] = []
    for i in range(n):
        a, b = offsets[i], offsets[i + 1]
        out.append(pairs[a:b] if valid[i] and b > a else None)
    return out


def _sizes(batch: Any) -> Any:
    """:func:`record_size` of every row at once (numpy int64)."""
    import numpy as np
    import pyarrow.compute as pc

    def lengths(arr: Any) -> Any:
        return pc.fill_null(pc.binary_length(arr), 0).to_numpy(zero_copy_only=False).astype(np.int64)

    size = lengths(batch.column(0)) + lengths(batch.column(1)) + (_BATCH_OVERHEAD + _RECORD_OVERHEAD)
    headers = batch.column(6)
    if headers.null_count < len(headers):
        flat = headers.values
        entry = lengths(flat.field(0)) + lengths(flat.field(1)) + _HEADER_OVERHEAD
        cumulative = np.concatenate([[0], np.cumsum(entry)])
        offsets = pc.fill_null(headers.offsets, 0).to_numpy(zero_copy_only=False)
        size += cumulative[offsets[1:]] - cumulative[offsets[:-1]]
    return size


def produce_batch(producer: Any, batch: Any, plan: WritePlan, parts: dict[tuple[str, int], PartitionWrite]) -> None:
    """Hand every row of one Arrow batch to the producer (acknowledgements come later)."""
    import pyarrow.compute as pc

    n = batch.num_rows
    if n == 0:
        return
    keys = batch.column(0).to_pylist()
    values = batch.column(1).to_pylist()
    offsets = batch.column(4).to_pylist()
    stamps = batch.column(5).to_pylist()
    headers = _headers(batch.column(6))
    sizes = _sizes(batch)
    produce = producer.produce
    poll = producer.poll
    for start, end, topic, partition in _runs(batch):
        w = parts.get((topic, partition))
        if w is None:
            w = parts[(topic, partition)] = PartitionWrite(topic, plan.remote_topic(topic), partition)
            w.first_offset = offsets[start]
        remote = w.remote
        on_delivery = w.delivered
        sent = w.sent
        limit = plan.max_record_bytes.get(remote)
        too_big = {int(j) + start for j in (sizes[start:end] > limit).nonzero()[0]} if limit is not None else set()
        for i in range(start, end):
            if too_big and i in too_big:
                # The target would refuse it, and with it every record batched
                # alongside: keep it out of the batch and settle it on its own.
                reason = f"MSG_SIZE_TOO_LARGE: larger than max.message.bytes={limit}"
                w.record_failures.append((offsets[i], (keys[i], values[i], headers[i], stamps[i]), reason))
                continue
            try:
                produce(
                    remote,
                    values[i],
                    keys[i],
                    partition=partition,
                    timestamp=stamps[i] or 0,
                    headers=headers[i],
                    on_delivery=on_delivery,
                )
            except BufferError:
                _produce_when_room(producer, plan, w, remote, partition, i, keys, values, stamps, headers)
            except Exception as exc:  # noqa: BLE001 - KafkaException from a local check
                if not _local_refusal(plan, w, exc, offsets[i], (keys[i], values[i], headers[i], stamps[i])):
                    raise
                continue
            sent.append(offsets[i])
            if (i & 1023) == 0:
                poll(0)
        w.records += end - start
        w.last_offset = offsets[end - 1]
        run = batch.slice(start, end - start)
        w.bytes += int(pc.sum(pc.fill_null(pc.binary_length(run.column(0)), 0)).as_py() or 0) + int(
            pc.sum(pc.fill_null(pc.binary_length(run.column(1)), 0)).as_py() or 0
        )
        top = pc.max(run.column(5)).as_py()
        if top is not None and top > w.max_ts:
            w.max_ts = top


def _produce_when_room(
    producer: Any,
    plan: WritePlan,
    w: PartitionWrite,
    remote: str,
    partition: int,
    i: int,
    keys: list[Any],
    values: list[Any],
    stamps: list[Any],
    headers: list[Any],
) -> None:
    """The local queue is full: serve delivery reports until the record fits."""
    while True:
        producer.poll(0.05)
        try:
            producer.produce(
                remote,
                values[i],
                keys[i],
                partition=partition,
                timestamp=stamps[i] or 0,
                headers=headers[i],
                on_delivery=w.delivered,
            )
            return
        except BufferError:
            continue


def _local_refusal(plan: WritePlan, w: PartitionWrite, exc: Exception, upstream: int, record: Any) -> bool:
    """A record the producer refused before sending: True when it is a record error to settle."""
    err: Any = exc.args[0] if exc.args else None
    name = err.name() if hasattr(err, "name") else type(exc).__name__
    if name in _RECORD_ERRORS:
        w.record_failures.append((upstream, record, f"{name}: {exc}"))
        return True
    raise WriteError(
        f"flow={plan.flow} {w.topic}[{w.partition}] offset={upstream}: cannot produce to "
        f"{w.remote}[{w.partition}]: {exc}",
        terminal=False,
    ) from None


def await_acks(producer: Any, plan: WritePlan, parts: dict[tuple[str, int], PartitionWrite]) -> None:
    deadline = time.monotonic() + plan.flush_timeout_s
    while True:
        remaining = producer.flush(1.0)
        if remaining == 0 and all(w.pending <= 0 for w in parts.values()):
            break
        if time.monotonic() > deadline:
            raise WriteError(
                f"flow={plan.flow}: {remaining} records not acknowledged by the target within "
                f"{plan.flush_timeout_s:.0f}s",
                terminal=False,
            )
    for w in parts.values():
        if w.failure is not None:
            upstream, name, text = w.failure
            raise WriteError(
                f"flow={plan.flow} {w.topic}[{w.partition}] offset={upstream}: delivery to "
                f"{w.remote}[{w.partition}] failed ({name}: {text}); the batch will be replayed",
                terminal=False,
            )


def settle_record_failures(producer: Any, plan: WritePlan, parts: dict[tuple[str, int], PartitionWrite]) -> bool:
    """Records the target refused for good: dead-letter them, or report the refusal.

    Returns True when a refusal was recorded (``PartitionWrite.refusal``): the
    task then returns normally with the refusal in its result row, and the
    driver stops the flow without committing the batch. Raising instead would
    make Spark retry the task, rewriting its range up to four times.
    """
    failures = [(w, f) for w in parts.values() for f in sorted(w.record_failures, key=lambda f: f[0])]
    if not failures:
        return False
    if plan.errors_tolerance != "all":
        w, (upstream, _record, reason) = failures[0]
        hint = (
            "check the principal's ACLs on the target"
            if any(a in reason for a in _AUTHORIZATION)
            else "raise the target's max.message.bytes / the producer's max.request.size, "
            "or set errors.tolerance=all to send such records to the dead-letter topic"
        )
        w.refusal = (
            f"flow={plan.flow} {w.topic}[{w.partition}] offset={upstream}: the target refused the record "
            f"for {w.remote}[{w.partition}] ({reason}); {hint}"
        )
        return True
    dlq_errors: list[str] = []
    for w, (upstream, record, reason) in failures:
        key, value, hdrs, ts = record
        meta = [
            (DLQ_HEADER_PREFIX + "topic", w.topic.encode()),
            (DLQ_HEADER_PREFIX + "partition", str(w.partition).encode()),
            (DLQ_HEADER_PREFIX + "offset", str(upstream).encode()),
            (DLQ_HEADER_PREFIX + "exception.message", reason.encode()),
            (DLQ_HEADER_PREFIX + "remote.topic", w.remote.encode()),
        ]
        dl_value = value
        if "SIZE_TOO_LARGE" in reason or "LIST_TOO_LARGE" in reason:
            # The value itself is what the target refused; keep its size and
            # where to find it on the source instead.
            dl_value = None
            meta.append((DLQ_HEADER_PREFIX + "value.omitted.bytes", str(len(value or b"")).encode()))

        def on_dl(err: Any, _msg: Any, _u: int = upstream, _w: PartitionWrite = w) -> None:
            if err is not None:
                dlq_errors.append(f"{_w.topic}[{_w.partition}] offset={_u}: {err.str()}")

        producer.produce(
            plan.dead_letter_topic,
            value=dl_value,
            key=key,
            timestamp=ts or 0,
            headers=(hdrs or []) + meta,
            on_delivery=on_dl,
        )
        w.dead_lettered += 1
        log.warning(
            "flow=%s %s[%d] offset=%d sent to dead-letter topic %s: %s",
            plan.flow,
            w.topic,
            w.partition,
            upstream,
            plan.dead_letter_topic,
            reason,
        )
    remaining = producer.flush(plan.flush_timeout_s)
    if remaining or dlq_errors:
        raise WriteError(
            f"flow={plan.flow}: could not write to dead-letter topic {plan.dead_letter_topic}: "
            + ("; ".join(dlq_errors[:3]) or f"{remaining} records unacknowledged"),
            terminal=False,
        )
    return False
