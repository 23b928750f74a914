"""The two sources of a task's records; each yields one source partition's records at a time.

:func:`arrow_records` takes the Arrow batches Spark's Kafka source hands a ``mapInArrow`` task
(``sparkmirror.source.reader = spark``). :class:`RangeReader` reads the offset ranges Spark planned
for the batch with one librdkafka consumer (``read_committed``), the default reader: it cuts the CPU
per record against Spark's JVM consumer, Arrow and the worker socket (docs/performance.md).

A source only reads: what happens to the records is the sink's (:mod:`.sink`).

A range is complete when the consumer has handed over its record at ``until - 1``, or a record
at or past ``until``, or reported the partition's end at or past ``until`` (a range may end on a
transaction marker or aborted records, which a ``read_committed`` consumer never hands over).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator, Iterable, Iterator
from typing import TYPE_CHECKING

from sparkmirror.core.ranges import SourceRange
from sparkmirror.pipeline.exceptions import WriteError
from sparkmirror.pipeline.executor import clients
from sparkmirror.pipeline.executor.plan import PartitionKey, WritePlan
from sparkmirror.pipeline.executor.sink import Headers, Record

if TYPE_CHECKING:
    import pyarrow as pa
    from confluent_kafka import KafkaError

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

#: Messages asked of the consumer per call.
_CONSUME_BATCH = 10_000
#: Longest wait of one consume call when fewer messages than asked for are there (transaction
#: markers, compacted or aborted records leave fewer records than offsets).
_CONSUME_WAIT_S = 0.1
#: A range that gets no record (nor its end) for this long fails the task, which is retried.
STALL_TIMEOUT_S = 120.0


# -- Spark's Arrow batches ---------------------------------------------------------------------


def arrow_records(batches: Iterable[pa.RecordBatch]) -> Iterator[tuple[PartitionKey, Iterator[Record]]]:
    """Each batch's rows of :data:`INPUT_COLUMNS`, one run of one source partition at a time."""
    for batch in batches:
        if batch.num_rows == 0:
            continue
        keys = batch.column(0).to_pylist()
        values = batch.column(1).to_pylist()
        offsets = batch.column(4).to_pylist()
        stamps = [ts or 0 for ts in batch.column(5).to_pylist()]
        headers = _headers(batch.column(6))
        for start, end, topic, partition in _runs(batch):
            rows = zip(
                offsets[start:end],
                keys[start:end],
                values[start:end],
                stamps[start:end],
                headers[start:end],
                strict=True,
            )
            yield (topic, partition), rows


def _runs(batch: pa.RecordBatch) -> list[tuple[int, int, str, int]]:
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


def _headers(column: pa.Array) -> list[Headers | None]:
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


# -- the planned ranges, read with librdkafka --------------------------------------------------


class _Range:
    """One range being read: where it ends and the next offset it can take."""

    __slots__ = ("r", "next")

    def __init__(self, r: SourceRange) -> None:
        self.r = r
        self.next = r.start


class RangeReader:
    """Reads ``ranges`` to their ends; iterating yields one partition's records at a time."""

    def __init__(self, plan: WritePlan, ranges: Iterable[SourceRange]) -> None:
        self.plan = plan
        self.ranges = [r for r in ranges if r.until > r.start]

    def __iter__(self) -> Generator[tuple[PartitionKey, list[Record]], None, None]:
        from confluent_kafka import KafkaError, TopicPartition

        active = {(r.topic, r.partition): _Range(r) for r in self.ranges}
        if not active:
            return  # nothing to read: no consumer is made
        consumer = clients.source_consumer(self.plan)
        eof = KafkaError._PARTITION_EOF
        try:
            consumer.incremental_assign([TopicPartition(t, p, s.r.start) for (t, p), s in active.items()])
            last_progress = time.monotonic()
            while active:
                # librdkafka's batch consume returns when it has as many messages as asked for, or
                # at its timeout: ask for no more than the ranges can still hold (partition ends
                # count as messages), so the last records of a range do not wait for the timeout.
                want = sum(s.r.until - s.next for s in active.values())
                msgs = consumer.consume(max(1, min(_CONSUME_BATCH, want)), _CONSUME_WAIT_S)
                if time.monotonic() - last_progress > STALL_TIMEOUT_S:
                    self._stalled(active)
                done: list[PartitionKey] = []
                runs: dict[PartitionKey, list[Record]] = {}
                for m in msgs:
                    err = m.error()
                    key: PartitionKey = (m.topic(), m.partition())  # type: ignore[assignment]
                    s = active.get(key)
                    if s is None:
                        if err is not None and err.code() != eof:
                            self._client_error(err)  # not about one partition: raises if fatal, else logs
                        continue  # a partition already complete (or fetched for an earlier task)
                    offset: int = m.offset()  # type: ignore[assignment]
                    if err is not None:
                        if err.code() != eof:
                            # Also UNKNOWN_TOPIC_OR_PART: the batch is replayed, and Spark leaves a
                            # deleted topic out when it plans the replay again (failOnDataLoss=false).
                            raise WriteError(
                                f"flow={self.plan.flow} {s.r.topic}[{s.r.partition}] offset={s.next}: reading the "
                                f"source failed ({err.name()}: {err.str()}); the batch will be replayed",
                                terminal=False,
                            )
                        complete = offset >= s.r.until  # the partition's end, at or past the range's
                    elif offset >= s.r.until:
                        complete = True  # a record past the range (a gap before until: compaction, markers)
                    elif offset < s.next:
                        continue  # fetched for an earlier assignment of this partition, or handed over again
                    else:
                        s.next = offset + 1
                        ts = m.timestamp()[1]
                        run = runs.get(key)
                        if run is None:
                            run = runs[key] = []
                        run.append((offset, m.key(), m.value(), ts if ts > 0 else 0, m.headers()))  # type: ignore[arg-type]
                        complete = offset + 1 >= s.r.until  # the range's last record
                    if complete:
                        done.append(key)
                        del active[key]
                if runs or done:
                    last_progress = time.monotonic()
                yield from runs.items()
                if done:
                    consumer.incremental_unassign([TopicPartition(t, p) for t, p in done])
        except BaseException:
            clients.discard_consumer(consumer)
            raise
        if active:
            consumer.incremental_unassign([TopicPartition(t, p) for t, p in active])

    def _client_error(self, err: KafkaError) -> None:
        check_client_error(self.plan.flow, err, "the batch will be replayed")

    def _stalled(self, active: dict[PartitionKey, _Range]) -> None:
        s = next(iter(active.values()))
        raise WriteError(
            f"flow={self.plan.flow} {s.r.topic}[{s.r.partition}]: no record from the source at offset {s.next} "
            f"(range ends at {s.r.until}) for {STALL_TIMEOUT_S:.0f}s; the batch will be replayed",
            terminal=False,
        )


def check_client_error(flow: str, err: KafkaError, then: str) -> None:
    """An error of a source consumer as a whole (connection, authentication), not of one partition:
    a fatal one fails the task (a retriable :class:`WriteError` ending in ``then``), any other is
    logged and waited out. Both engines' readers ask it."""
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
        raise WriteError(f"flow={flow}: the source consumer failed ({err.name()}: {err.str()}); {then}", terminal=False)
    log.warning("flow=%s source consumer: %s: %s", flow, err.name(), err.str())
