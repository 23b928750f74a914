"""The sink: writes a task's records to the target and says when they are safe.

Every record the task's consumer hands over (:mod:`.stream`) goes to the same partition of the remote topic
with its key, value, headers and timestamp. The sink keeps, per source partition, which upstream
offset each produced record had and which downstream offset the target acknowledged, so the
offset map's segments come out exact. How a partition's writes become final is its
:class:`Commit` (:mod:`.commit`): at least once (every record acknowledged) or in a transaction.

What it must never do: report a partition as written while one of its records is neither
acknowledged by the target nor (``errors.tolerance=all``) written to the dead-letter topic.
Every other outcome raises, or (a record the target refuses for good) is returned as the
partition's refusal, and nothing past it becomes progress.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Protocol

from sparkmirror.core.offsetmap import Segment, extend_tail, segments_from_offsets
from sparkmirror.pipeline.exceptions import WriteError
from sparkmirror.pipeline.executor.plan import Headers, PartitionKey, Record, WritePlan
from sparkmirror.pipeline.executor.results import PartitionResult
from sparkmirror.pipeline.executor.waits import WARN_EVERY_S, brokers_text, partition_text, target_text

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message, Producer

log = logging.getLogger(__name__)


# Kafka's record batch header is 61 bytes; a record adds a few varints and its attributes.
# Over-estimating by a little only moves the edge case from the broker's refusal to ours, which is
# cheaper and names the offset.
_BATCH_OVERHEAD = 61
_RECORD_OVERHEAD = 21
_HEADER_OVERHEAD = 10

# librdkafka error names that reject one record for good: retrying the same record cannot
# succeed. Everything else fails the task, which Spark retries from the progress on the target.
RECORD_ERRORS = frozenset(
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

#: Within one partition's run of records, its producer's delivery reports are served every this many
#: records (the task serves every producer's once per read besides).
_POLL_EVERY = 1024
#: ``min_ts`` before the first record.
_NO_TIMESTAMP = 2**63 - 1
#: Seconds of one flush while a task waits for acknowledgements (it checks its limit and warns between them).
_FLUSH_SLICE_S = 1.0
#: Delivery reports' clock readings are summed relative to this second: a sum of wall-clock floats
#: would lose milliseconds over an interval of many records.
_ACKS_EPOCH_S_INT = int(time.time())
_ACKS_EPOCH_S = float(_ACKS_EPOCH_S_INT)
#: Seconds of one wait for delivery reports while other records are being produced (the lock is held meanwhile).
_SERVE_SLICE_S = 0.02
#: Seconds a producer whose local queue is full serves delivery reports before it is offered the record again.
_QUEUE_FULL_POLL_S = 0.05


def record_size(key: bytes | None, value: bytes | None, headers: Headers | None) -> int:
    """An upper estimate of a record's size in a batch of its own, in bytes."""
    size = _BATCH_OVERHEAD + _RECORD_OVERHEAD + (len(key) if key else 0) + (len(value) if value else 0)
    for hk, hv in headers or ():
        size += _HEADER_OVERHEAD + len(hk.encode()) + (len(hv) if hv else 0)
    return size


#: A record the target refused for good: (upstream offset, the record, reason).
RecordFailure = tuple[int, Record, str]


class PartitionWrite:
    """One source partition's records within one task: what was produced and acknowledged."""

    __slots__ = (
        "topic",
        "remote",
        "partition",
        "producer",
        "limit",
        "floor",
        "begun",
        "bytes",
        "first_offset",
        "last_offset",
        "failure",
        "record_failures",
        "local_refusals",
        "dead_lettered",
        "max_ts",
        "min_ts",
        "ts_sum",
        "acks_s_sum",
        "last_ack_s",
        "read_at_ms",
        "acked_at_ms",
        "refusal",
        "sent",
        "failed",
        "ds",
        "segments",
    )

    def __init__(self, topic: str, remote: str, partition: int, producer: Producer | None, limit: int | None) -> None:
        self.topic = topic
        self.remote = remote
        self.partition = partition
        #: ``None`` while its producer rests (:meth:`Sink.rest_idle`): its next record gets one again.
        self.producer: Producer | None = producer
        #: max.message.bytes of the remote topic (None: unknown).
        self.limit = limit
        #: Records below this upstream offset are already on the target (the progress read when the task opened it).
        self.floor = -1
        #: The commit has begun this partition's writes (exactly-once: its transaction is open).
        self.begun = False
        self.bytes = 0
        self.first_offset = -1
        self.last_offset = -1
        #: The first delivery failure that fails the task: (upstream, error name, text).
        self.failure: tuple[int, str, str] | None = None
        self.record_failures: list[RecordFailure] = []
        #: Records refused before they reached the producer (size, a local check).
        self.local_refusals = 0
        self.dead_lettered = 0
        self.max_ts = -1
        self.min_ts = _NO_TIMESTAMP
        #: Sum of the handed-over records' timestamps (their mean age and latency, for the metrics).
        self.ts_sum = 0
        #: Sum of the wall clock at which each acknowledged record's delivery report was served, in seconds
        #: since :data:`_ACKS_EPOCH_S`: at least once a record is final when acknowledged, not when its
        #: interval ends.
        self.acks_s_sum = 0.0
        #: The last of those readings: when every acknowledged record was.
        self.last_ack_s = 0.0
        #: Wall clock (ms) when the first record was handed over, and when all were final.
        self.read_at_ms = 0
        self.acked_at_ms = 0
        #: A terminal refusal (errors.tolerance=none): the driver stops the flow.
        self.refusal: str | None = None
        #: Upstream offset of every record handed to the producer, in produce order.
        self.sent: list[int] = []
        #: Indexes into ``sent`` of the records whose delivery failed.
        self.failed: list[int] = []
        #: Target offset of every acknowledged record, in report (= produce) order.
        self.ds: list[int] = []
        #: Offset-map segments of what this task wrote (see :func:`finish_segments`).
        self.segments: list[Segment] = []

    @property
    def records(self) -> int:
        return len(self.sent) + self.local_refusals

    @property
    def writer(self) -> Producer:
        """The producer of a partition written to (one with records never rests)."""
        assert self.producer is not None, f"{self.topic}[{self.partition}] has no producer"
        return self.producer

    @property
    def first_target(self) -> int:
        return self.ds[0] if self.ds else -1

    @property
    def last_target(self) -> int:
        return self.ds[-1] if self.ds else -1

    @property
    def pending(self) -> int:
        """Records handed to the producer whose delivery report has not arrived yet."""
        return len(self.sent) - len(self.ds) - len(self.failed)

    def acknowledged(self) -> list[int]:
        """Upstream offsets of the acknowledged records, paired index by index with ``ds``."""
        if not self.failed:
            return self.sent[: len(self.ds)]
        failed = set(self.failed)
        return [u for i, u in enumerate(self.sent) if i not in failed]

    def delivered(self, err: KafkaError | None, msg: Message) -> None:
        """The producer's delivery report for this partition's next record (the hot path).

        librdkafka reports the records of one partition in the order they were produced (the
        idempotent producer keeps that order through retries), so the n-th report belongs to
        ``sent[n]``: one bound method serves every record and a success costs one append.
        :func:`check_report_order` verifies the assumption on every task: offsets the target
        assigned must rise in report order.
        """
        if err is None:
            self.ds.append(msg.offset())  # type: ignore[arg-type]
            now = time.time() - _ACKS_EPOCH_S  # time_ns() // 10**6 cost 3x as much a record
            self.acks_s_sum += now
            self.last_ack_s = now
        else:
            self._failed(err, msg)

    def _failed(self, err: KafkaError, msg: Message) -> None:
        index = len(self.ds) + len(self.failed)
        self.failed.append(index)
        upstream = self.sent[index]
        name = err.name()
        if name in RECORD_ERRORS:
            ts = msg.timestamp()[1]
            record: Record = (upstream, msg.key(), msg.value(), ts if ts > 0 else 0, msg.headers())  # type: ignore[assignment]
            self.record_failures.append((upstream, record, f"{name}: {err.str()}"))
        elif self.failure is None or upstream < self.failure[0]:
            self.failure = (upstream, name, err.str())

    def result(self, *, committed: bool = False) -> PartitionResult:
        """What the task reports of this partition's interval. Its latency (MM2's replication latency):
        each record's time from its timestamp to its acknowledgement, or, ``committed`` (exactly once),
        to its transaction's commit; a record dead-lettered or refused is final at the interval's end."""
        n = self.records
        acked = len(self.ds)
        final_at_ms, final_ms_sum = self.acked_at_ms, self.acked_at_ms * n
        if acked and not committed:
            epoch_ms = _ACKS_EPOCH_S_INT * 1000
            final_ms_sum = epoch_ms * acked + round(self.acks_s_sum * 1000) + self.acked_at_ms * (n - acked)
            if acked == n:  # else a dead-lettered or refused record was final at the interval's end
                final_at_ms = epoch_ms + round(self.last_ack_s * 1000)
        return PartitionResult(
            topic=self.topic,
            partition=self.partition,
            records=self.records,
            bytes=self.bytes,
            first_offset=self.first_offset,
            last_offset=self.last_offset,
            first_target_offset=self.first_target,
            last_target_offset=self.last_target,
            dead_lettered=self.dead_lettered,
            max_timestamp_ms=self.max_ts,
            min_timestamp_ms=self.min_ts if n else -1,
            read_at_ms=self.read_at_ms,
            acked_at_ms=final_at_ms,
            age_sum_ms=self.read_at_ms * n - self.ts_sum if n else 0,
            latency_sum_ms=final_ms_sum - self.ts_sum if n else 0,
            error=self.refusal,
            segments=tuple((g.upstream_start, g.downstream_start, g.count) for g in self.segments),
        )


class Commit(Protocol):
    """How a sink's partitions become final: at least once, or in transactions (:mod:`.commit`)."""

    #: Held by whoever serves the commit's producers' delivery reports: the task's loop, or (the
    #: streaming engine at least once) the commit finishing an interval beside it. A partition's
    #: reports then never run in two threads at once, so they stay in produce order.
    serving: threading.Lock

    def producer_for(self, partition: PartitionKey) -> Producer:
        """The producer that writes this source partition."""

    def group_of(self, partition: PartitionKey) -> str | None:
        """The partition's group, finished on its own (exactly once: its transactional id), or None
        (at least once: an interval is finished whole)."""

    def open(self, parts: Sequence[PartitionWrite]) -> None:
        """Ready the partitions before their first record (exactly-once: fence, read progress into ``floor``)."""

    def begin(self, w: PartitionWrite) -> None:
        """Just before the partition's first record is produced."""

    def finish(self, parts: Sequence[PartitionWrite]) -> None:
        """Make every begun partition's writes final, or raise."""

    def abandon(self, parts: Sequence[PartitionWrite]) -> None:
        """After a failure: leave nothing half-written behind (abort, forget failed clients)."""

    def rest(self, producer: Producer) -> bool:
        """Close an idle producer holding nothing, if the commit allows it (True: closed); the next
        :meth:`producer_for` of its partitions makes it again."""


class Sink:
    """Writes one task's records to the target; :meth:`seal` ends an interval, :meth:`finish` makes it
    final and returns what was written."""

    def __init__(self, plan: WritePlan, commit: Commit) -> None:
        self.plan = plan
        self.commit = commit
        self.parts: dict[PartitionKey, PartitionWrite] = {}
        self._producers: list[Producer] = []
        #: Intervals sealed and not yet finished (at least once, one may be finished in another thread).
        self._unfinished = 0
        #: When each producer (by ``id``) last had an interval's records, or was first looked at by
        #: :meth:`rest_idle` (monotonic s).
        self._used: dict[int, float] = {}
        #: Partitions written since the last :meth:`seal` (each begun once an interval).
        self._begun = 0
        #: Records handed to producers in the streaming engine's earlier intervals (the test hook counts them).
        self._written_before = 0
        #: Each opened partition's group (:meth:`Commit.group_of`).
        self._group_of: dict[PartitionKey, str | None] = {}
        #: Groups sealed by :meth:`seal_groups` and not yet released, with their producers (by ``id``): a
        #: finishing group's new records are held, not produced, and its producers are not served here.
        self._holding: dict[str | None, set[int]] = {}
        self._busy: set[int] = set()
        #: The records held per partition, in the order read, and how many.
        self._held: dict[PartitionKey, list[Record]] = {}
        self.held = 0
        self._count_lock = threading.Lock()

    def open(self, partitions: Iterable[PartitionKey]) -> dict[PartitionKey, int]:
        """Ready these source partitions; returns each one's floor: records below it are already
        on the target and are not written again (-1: none)."""
        new = []
        for key in partitions:
            if key in self.parts:
                continue
            topic, partition = key
            remote = self.plan.remote_topic(topic)
            producer = self.commit.producer_for(key)
            w = PartitionWrite(topic, remote, partition, producer, self.plan.max_record_bytes.get(remote))
            self.parts[key] = w
            self._group_of[key] = self.commit.group_of(key)
            new.append(w)
            self._add(producer)
        if new:
            self.commit.open(new)
        return {key: w.floor for key, w in self.parts.items()}

    def write(self, key: PartitionKey, records: Sequence[Record]) -> int:
        """Hand one source partition's records (as a read hands them, in offset order) to its producer;
        acks come later. Returns the key and value bytes handed over.

        The hot path: each record goes to the producer as it came (no copy of it is built), and delivery
        reports are served every :data:`_POLL_EVERY` records of a partition only: the task serves every
        producer once per read (:meth:`serve`)."""
        w = self.parts.get(key)
        if w is None:
            self.open([key])
            w = self.parts[key]
        if self._holding and self._group_of[key] in self._holding:
            return self._hold(key, records)
        floor = w.floor
        limit = w.limit
        quick = (limit if limit is not None else 0) - _BATCH_OVERHEAD - _RECORD_OVERHEAD
        producer = w.producer
        if producer is None:  # it rested: the partition's first record since makes it again
            producer = w.producer = self.commit.producer_for(key)
            self._add(producer)
        produce = producer.produce
        on_delivery = w.delivered
        remote = w.remote
        partition = w.partition
        sent = w.sent
        before = written = w.bytes
        max_ts = w.max_ts
        min_ts = w.min_ts
        ts_sum = w.ts_sum
        last = w.last_offset
        for offset, key_, value, ts, headers in records:
            if offset <= last:
                continue  # handed over again
            if offset < floor:
                continue  # already on the target (the progress read when the task opened it)
            if not w.begun:
                self.commit.begin(w)
                self._begun += 1
                w.first_offset = offset
                w.read_at_ms = int(time.time() * 1000)
            last = offset
            if ts < 0:
                ts = 0  # no timestamp: the producer stamps it
            n = (len(key_) if key_ is not None else 0) + (len(value) if value is not None else 0)
            written += n
            ts_sum += ts
            if ts > max_ts:
                max_ts = ts
            if ts < min_ts:
                min_ts = ts
            if limit is not None:
                # A cheap upper bound of record_size first (a header name's UTF-8 is at most 4
                # bytes a character); the exact estimate only for records near the limit.
                bound = n
                if headers:
                    for hk, hv in headers:
                        bound += _HEADER_OVERHEAD + 4 * len(hk) + (len(hv) if hv is not None else 0)
                if bound > quick and record_size(key_, value, headers) > limit:
                    # The target would refuse it, and every record batched with it: settle it on its own.
                    reason = f"MSG_SIZE_TOO_LARGE: larger than max.message.bytes={limit}"
                    w.record_failures.append((offset, (offset, key_, value, ts, headers), reason))
                    w.local_refusals += 1
                    continue
            # In ``sent`` before the producer has it: its delivery report may be served in another
            # thread (the commit finishing an earlier interval) as soon as it is produced.
            sent.append(offset)
            try:
                # Positional: (topic, value, key, partition, callback, on_delivery, timestamp, headers).
                # Keywords cost about 1.3 µs a record more (docs/performance.md);
                # tests/unit/pipeline/test_produce_arguments.py pins the order.
                produce(remote, value, key_, partition, on_delivery, None, ts, headers)
            except BufferError:
                # The local queue is full: the slow path serves delivery reports until it fits.
                sent.pop()
                if not self._produce_when_room(w, (offset, key_, value, ts, headers)):
                    continue
            except Exception as exc:  # noqa: BLE001 - KafkaException from a local check
                sent.pop()
                self._local_refusal(w, exc, (offset, key_, value, ts, headers))
                continue
            if (len(sent) & (_POLL_EVERY - 1)) == 0:
                self._serve(producer)
        w.bytes = written
        w.max_ts = max_ts
        w.min_ts = min_ts
        w.ts_sum = ts_sum
        w.last_offset = last
        if self.plan.test_fail_after_records:
            self._test_hook_fail()
        return written - before

    def _produce_when_room(self, w: PartitionWrite, record: Record) -> bool:
        """:meth:`write`'s record once the producer's full queue takes it; False if it was refused."""
        offset, key, value, ts, headers = record
        producer = w.writer

        def produce() -> None:
            w.sent.append(offset)  # before the producer has it, as in :meth:`write`
            try:
                producer.produce(
                    w.remote, value, key, partition=w.partition, timestamp=ts, headers=headers, on_delivery=w.delivered
                )
            except BaseException:
                w.sent.pop()
                raise

        def waiting(waited: float) -> str:
            held = (
                f"{w.topic}[{w.partition}] offsets {w.first_offset}..{w.sent[-1]}"
                if w.sent
                else f"{w.topic}[{w.partition}]"
            )
            same = [p for p in self.parts.values() if p.producer is producer]
            return (
                f"flow={self.plan.flow} {held}: the producer's queue is full; offset {offset} has waited "
                f"{waited:.0f}s for the target to acknowledge earlier records ({len(producer)} in the producer; "
                f"librdkafka fails them after delivery.timeout.ms={delivery_timeout_ms(self.plan)}): "
                f"{unacknowledged(producer, same)}"
            )

        try:
            produce_when_room(producer, produce, waiting, self.plan.flush_timeout_s, self.commit.serving)
        except WriteError:
            raise  # the queue never freed: already says where and why
        except Exception as exc:  # noqa: BLE001 - KafkaException from a local check
            self._local_refusal(w, exc, record)
            return False
        return True

    def _local_refusal(self, w: PartitionWrite, exc: Exception, record: Record) -> None:
        """A record the producer refused before sending: settled if it is a record error, else raises."""
        from confluent_kafka import KafkaError

        err = exc.args[0] if exc.args else None
        name = err.name() if isinstance(err, KafkaError) else type(exc).__name__
        if name in RECORD_ERRORS:
            w.record_failures.append((record[0], record, f"{name}: {exc}"))
            w.local_refusals += 1
            return
        if name == "_STATE" and self.plan.exactly_once:
            # The transaction is in error: a record the target refused, whose delivery report may not
            # have been served yet, is the cause; that refusal stops the flow (refused_in_transaction).
            self._serve(w.writer)
            group = [p for p in self.parts.values() if p.producer is w.producer]
            if refused_in_transaction(self.plan, group):
                raise WriteError(next(p.refusal for p in group if p.refusal), terminal=True) from None
        raise WriteError(
            f"flow={self.plan.flow} {w.topic}[{w.partition}] offset={record[0]}: cannot produce to "
            f"{w.remote}[{w.partition}]: {exc}",
            terminal=False,
        ) from None

    def _hold(self, key: PartitionKey, records: Sequence[Record]) -> int:
        """:meth:`write` for a partition whose group is finishing: its records wait, in order, until
        :meth:`release_group` writes them (the group's next transaction cannot begin before this one ends).
        Returns their key and value bytes, as a write would."""
        self._held.setdefault(key, []).extend(records)
        self.held += len(records)
        return sum((len(k) if k is not None else 0) + (len(v) if v is not None else 0) for _o, k, v, _t, _h in records)

    def seal(self) -> list[PartitionWrite]:
        """The task's interval ends: every partition written since the last one is handed
        over for :meth:`finish` and continues on the same producer in a fresh write.

        A fresh write skips nothing its interval's write had not skipped: floor and last offset carry
        over. Its records may be produced while the sealed ones are still being finished.
        """
        sealed = self._seal()
        if sealed:
            with self._count_lock:
                self._unfinished += 1
        return sealed

    def seal_groups(self) -> dict[str | None, list[PartitionWrite]]:
        """:meth:`seal`, each group (:meth:`Commit.group_of`) to be finished on its own, beside the
        reads: until :meth:`release_group` of a group, its partitions' new records are held, not produced, and
        its producers are left to its finish. A group still finishing has nothing to seal (its records
        are held), so a group's intervals are finished one at a time, in order."""
        groups: dict[str | None, list[PartitionWrite]] = {}
        for w in self._seal():
            groups.setdefault(self._group_of[(w.topic, w.partition)], []).append(w)
        with self._count_lock:
            self._unfinished += len(groups)
        for group, parts in groups.items():
            producers = self._holding[group] = {id(w.producer) for w in parts}
            self._busy |= producers
        return groups

    def release_group(self, group: str | None) -> int:
        """A group's finish ended (committed, or it raised and the task fails anyway): its producers
        are the loop's again, and the records held meanwhile are written, in order, before any read
        after them. Returns how many were held."""
        self._busy -= self._holding.pop(group, set())
        keys = [k for k in self._held if self._group_of[k] == group]
        released = 0
        for key in keys:
            records = self._held.pop(key)
            released += len(records)
            self.write(key, records)
        self.held -= released
        return released

    def _seal(self) -> list[PartitionWrite]:
        sealed = [w for w in self.parts.values() if w.begun]
        self._begun = 0
        now = time.monotonic()
        for w in sealed:
            self._used[id(w.producer)] = now
            self._written_before += len(w.sent)
            fresh = PartitionWrite(w.topic, w.remote, w.partition, w.producer, w.limit)
            fresh.floor = w.floor
            fresh.last_offset = w.last_offset
            self.parts[(w.topic, w.partition)] = fresh
        return sealed

    def finish(self, sealed: Sequence[PartitionWrite]) -> list[PartitionResult]:
        """Make a sealed interval final (its :class:`Commit`: acknowledged, segments and progress
        durable; or the transaction committed) and return its results. Intervals are finished one at
        a time, in the order they were sealed: each continues the last segment of the one before
        (``plan.tails``)."""
        if not sealed:
            return []
        try:
            self.commit.finish(sealed)
        finally:
            with self._count_lock:  # groups finish in threads of their own (:meth:`seal_groups`)
                self._unfinished -= 1
        acked_at = int(time.time() * 1000)
        results = []
        for w in sealed:
            w.acked_at_ms = acked_at
            results.append(w.result(committed=self.plan.exactly_once))
            if w.segments:
                last = w.segments[-1]
                self.plan.tails[(w.topic, w.partition)] = (last.upstream_start, last.downstream_start, last.count)
        return results

    def rest_idle(self, idle_s: float) -> int:
        """Close the producers none of whose partitions had a record for ``idle_s`` seconds, where the
        commit allows it (:meth:`Commit.rest`); returns how many. Only between intervals: with a record
        written since the last :meth:`seal`, or an interval not yet finished (its records' reports may
        still be served on its producers, in another thread), none rests."""
        if self.written or self._unfinished or self._holding or self.held:
            return 0
        now = time.monotonic()
        # A producer not yet looked at is idle from now on (no clock read where one is added: the hot path).
        rested = [
            p for p in self._producers if now - self._used.setdefault(id(p), now) >= idle_s and self.commit.rest(p)
        ]
        for producer in rested:
            self._producers.remove(producer)
            del self._used[id(producer)]
            for w in self.parts.values():
                if w.producer is producer:
                    w.producer = None
        return len(rested)

    def _add(self, producer: Producer) -> None:
        if not any(p is producer for p in self._producers):
            self._producers.append(producer)

    @property
    def written(self) -> bool:
        """Whether a partition has records since the last commit (:meth:`seal`)."""
        return self._begun > 0

    def serve(self) -> None:
        """Serve every producer's delivery reports that have arrived (a streaming task between records),
        unless the commit is serving them at the moment."""
        lock = self.commit.serving
        if lock.acquire(blocking=False):
            try:
                busy = self._busy
                for p in self._producers:
                    if not busy or id(p) not in busy:  # a finishing group's are its finish's to serve
                        p.poll(0)
            finally:
                lock.release()

    def unserved(self) -> bool:
        """Whether a producer the loop serves holds a record whose delivery report has not been served yet."""
        busy = self._busy
        return any(len(p) for p in self._producers if not busy or id(p) not in busy)

    def _serve(self, producer: Producer) -> None:
        """One producer's delivery reports that have arrived, unless the commit is serving them."""
        lock = self.commit.serving
        if lock.acquire(blocking=False):
            try:
                producer.poll(0)
            finally:
                lock.release()

    def abandon(self) -> None:
        self.commit.abandon(list(self.parts.values()))

    def release(self) -> None:
        """A streaming task that ends with everything committed: its exactly-once producers are not kept
        for a later task (the next job's producers fence them), its at-least-once producer is."""
        release = getattr(self.commit, "release", None)
        if release is not None:
            release()

    def _test_hook_fail(self) -> None:
        """TEST HOOK: fail the first attempt of a task once it has handed enough records to its producers."""
        from pyspark import TaskContext

        ctx = TaskContext.get()
        written = self._written_before + sum(len(w.sent) for w in self.parts.values())
        if ctx is not None and ctx.attemptNumber() == 0 and written >= self.plan.test_fail_after_records:
            for w in self.parts.values():
                if w.producer is not None and id(w.producer) not in self._busy:  # a finishing group's: its finish's
                    w.producer.flush(30)
            raise RuntimeError(f"injected task failure after {written} records (test hook)")


def produce_when_room(
    producer: Producer,
    produce: Callable[[], None],
    waiting: Callable[[float], str],
    limit_s: float,
    serving: threading.Lock | None = None,
) -> None:
    """``produce()`` again until the producer's local queue takes the record, serving delivery
    reports meanwhile; for a caller whose ``produce()`` raised :class:`BufferError`.

    The queue stays full while the target does not acknowledge what it holds. librdkafka bounds
    the wait: it fails queued records after ``delivery.timeout.ms``, which frees the queue (and
    fails the task once their acknowledgements are awaited). Until then the wait says what it waits
    for (``waiting(seconds waited)``) every :data:`~.waits.WARN_EVERY_S` seconds, and past
    ``limit_s`` (the flush limit: a ``delivery.timeout.ms`` above it, or a queue that frees no
    room) it fails the task with a retriable :class:`WriteError` saying the same. Errors of
    ``produce()`` other than :class:`BufferError` are the caller's. Delivery reports are served
    holding ``serving`` (:attr:`Commit.serving`), if given.
    """
    started = time.monotonic()
    next_warning = started + WARN_EVERY_S
    deadline = started + limit_s
    while True:
        with serving or nullcontext():
            producer.poll(_QUEUE_FULL_POLL_S)
        try:
            produce()
            return
        except BufferError:
            pass
        now = time.monotonic()
        if now >= deadline:
            raise WriteError(
                f"{_describe(functools.partial(waiting, now - started))}; giving up after {limit_s:g}s: "
                "the task fails and Spark writes its range again",
                terminal=False,
            )
        if now >= next_warning:
            next_warning += WARN_EVERY_S
            _warn(functools.partial(waiting, now - started))


def delivery_timeout_ms(plan: WritePlan) -> str:
    """How long librdkafka keeps trying a record: the producer's setting (one key, never the config)."""
    conf = plan.producer_config
    return conf.get("delivery.timeout.ms") or conf.get("message.timeout.ms") or "300000"


def check_report_order(plan: WritePlan, parts: Iterable[PartitionWrite]) -> None:
    """Offsets the target assigned to one producer's records of a partition rise in produce order;
    if the delivery reports disagree, pairing them with upstream offsets would corrupt the offset
    map: fail the task instead (Spark retries it from the progress on the target)."""
    for w in parts:
        ds = w.ds
        if any(b <= a for a, b in zip(ds, ds[1:], strict=False)):
            raise WriteError(
                f"flow={plan.flow} {w.topic}[{w.partition}] offsets {w.first_offset}..{w.last_offset}: "
                f"delivery reports for {w.remote}[{w.partition}] arrived out of produce order; "
                "the task is retried from the progress on the target",
                terminal=False,
            )


def refused_in_transaction(plan: WritePlan, parts: Sequence[PartitionWrite]) -> bool:
    """A record the target refused after it was sent makes the group's transaction abortable: nothing in
    it can commit, a dead-lettered copy neither. The first such partition gets the refusal (the flow stops
    naming it, whatever ``errors.tolerance``); True then. Records refused before sending (the size check)
    are settled in the transaction as at least once."""
    for w in parts:
        sent_and_refused = sorted({w.sent[i] for i in w.failed} & {f[0] for f in w.record_failures})
        if not sent_and_refused:
            continue
        first = sent_and_refused[0]
        reason = next(r for u, _rec, r in w.record_failures if u == first)
        # librdkafka fails a produce batch whole: the record is one of these, it cannot tell which.
        where = f"offset={first}" if len(sent_and_refused) == 1 else f"offsets {first}..{sent_and_refused[-1]}"
        w.refusal = (
            f"flow={plan.flow} {w.topic}[{w.partition}] {where}: the target refused a record for "
            f"{w.remote}[{w.partition}] ({reason}); exactly-once cannot dead-letter it (the refusal aborts the "
            "transaction, a dead-lettered copy too); the flow stops: fix the record or the remote topic's "
            "settings, or mirror this topic at least once with errors.tolerance=all"
        )
        return True
    return False


def await_acks(
    producer: Producer, plan: WritePlan, parts: Sequence[PartitionWrite], serving: threading.Lock | None = None
) -> None:
    """Wait until the target acknowledged every record of ``parts``; a failed delivery fails the task.

    Every :data:`~.waits.WARN_EVERY_S` seconds of waiting says which partitions wait and who leads
    them; past ``plan.flush_timeout_s`` the task fails. With ``serving`` (:func:`flush_within`) the
    producer may take other records meanwhile.
    """

    def waiting(remaining: int, waited: float) -> str:
        return (
            f"flow={plan.flow}: {remaining} records not yet acknowledged by the target after {waited:.0f}s "
            f"(giving up at {plan.flush_timeout_s:.0f}s): {unacknowledged(producer, parts)}"
        )

    remaining = flush_within(
        producer, plan.flush_timeout_s, lambda: all(w.pending <= 0 for w in parts), waiting, serving
    )
    if remaining is not None:
        raise WriteError(
            f"flow={plan.flow}: {remaining} records not acknowledged by the target within "
            f"{plan.flush_timeout_s:.0f}s: {unacknowledged(producer, parts)}",
            terminal=False,
        )
    for w in parts:
        if w.failure is not None:
            upstream, name, text = w.failure
            raise WriteError(
                f"flow={plan.flow} {w.topic}[{w.partition}] offset={upstream}: delivery to "
                f"{w.remote}[{w.partition}] failed ({name}: {text}); "
                "the task is retried from the progress on the target",
                terminal=False,
            )


def flush_within(
    producer: Producer,
    limit_s: float,
    done: Callable[[], bool],
    waiting: Callable[[int, float], str],
    serving: threading.Lock | None = None,
) -> int | None:
    """Flush ``producer`` until it holds nothing and ``done()``; None then, else (past ``limit_s``)
    how many records it still holds.

    With ``serving`` (:attr:`Commit.serving`) the producer may be taking other records meanwhile (the
    streaming engine's next interval), so it may never hold nothing: its delivery reports are served
    holding the lock until ``done()`` alone.

    Every :data:`~.waits.WARN_EVERY_S` seconds of waiting logs ``waiting(records held, seconds waited)``.
    """
    started = time.monotonic()
    deadline = started + limit_s
    next_warning = started + WARN_EVERY_S
    while True:
        if serving is None:
            remaining = producer.flush(_FLUSH_SLICE_S)
            if remaining == 0 and done():
                return None
        else:
            with serving:
                producer.poll(_SERVE_SLICE_S)
            if done():
                return None
            remaining = len(producer)
        now = time.monotonic()
        if now > deadline:
            return remaining
        if now >= next_warning:
            next_warning += WARN_EVERY_S
            _warn(functools.partial(waiting, remaining, now - started))


def _warn(waiting: Callable[[], str]) -> None:
    """A waiting task's warning, ``waiting()``."""
    log.warning("%s", _describe(waiting))


def _describe(waiting: Callable[[], str]) -> str:
    """``waiting()``, the description of a task's wait; describing it must not fail the wait."""
    try:
        return waiting()
    except Exception as exc:  # noqa: BLE001 - the wait (or its failure) must still be said
        return f"a task waits on the target (cannot describe the wait: {exc})"


def unacknowledged(producer: Producer, parts: Sequence[PartitionWrite]) -> str:
    """The partitions still waiting for acknowledgements, each with its leader as ``producer`` sees
    it, and the target's brokers (the metadata of each topic asked for once, at most 5 s)."""
    waiting = [w for w in parts if w.pending > 0] or list(parts)
    metadata: dict[str, object] = {}
    out = []
    for w in waiting[:5]:
        if w.remote not in metadata:
            try:
                metadata[w.remote] = producer.list_topics(w.remote, timeout=5)
            except Exception as exc:  # noqa: BLE001 - the warning must not fail the wait
                metadata[w.remote] = exc
        md = metadata[w.remote]
        if isinstance(md, Exception):
            where = f"{w.remote}[{w.partition}]: metadata unavailable ({md})"
        else:
            where = partition_text(md, w.remote, w.partition)
        out.append(f"{w.pending} of {w.topic}[{w.partition}] -> {where}")
    text = "; ".join(out) + (f"; and {len(waiting) - 5} more partitions" if len(waiting) > 5 else "")
    known = [md for md in metadata.values() if not isinstance(md, Exception)]
    return text + (f"; brokers {brokers_text(known[-1])}" if known else "")


def settle_record_failures(
    producer: Producer, plan: WritePlan, parts: Sequence[PartitionWrite], serving: threading.Lock | None = None
) -> bool:
    """Records the target refused for good: dead-letter them, or report the refusal.

    Returns True when a refusal was recorded (``PartitionWrite.refusal``): the commit then ends the
    interval without its progress (exactly once: the transaction is aborted), the task reports the
    refusal in its results, and the driver stops the flow. Raising instead would make Spark retry the
    task, writing the same records again up to four times.
    """
    failures = [(w, f) for w in parts for f in sorted(w.record_failures, key=lambda f: f[0])]
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
    dlq = plan.dead_letter_topic
    dlq_errors: list[str] = []
    #: The dead-lettered records whose delivery report has not arrived, by their order of production.
    outstanding: dict[int, str] = {}
    for n, (w, (upstream, record, reason)) in enumerate(failures):
        _offset, key, value, ts, hdrs = record
        meta: Headers = [
            (DLQ_HEADER_PREFIX + "topic", w.topic.encode()),
            (DLQ_HEADER_PREFIX + "partition", str(w.partition).encode()),
            (DLQ_HEADER_PREFIX + "offset", str(upstream).encode()),
            (DLQ_HEADER_PREFIX + "exception.message", reason.encode()),
            (DLQ_HEADER_PREFIX + "remote.topic", w.remote.encode()),
        ]
        dl_value = value
        if "SIZE_TOO_LARGE" in reason or "LIST_TOO_LARGE" in reason:
            # The value itself is what the target refused; keep its size and where to find it on
            # the source instead.
            dl_value = None
            meta.append((DLQ_HEADER_PREFIX + "value.omitted.bytes", str(len(value or b"")).encode()))
        where = f"{w.topic}[{w.partition}] offset={upstream}"

        def on_dl(err: KafkaError | None, _msg: Message, _n: int = n, _where: str = where) -> None:
            outstanding.pop(_n, None)
            if err is not None:
                dlq_errors.append(f"{_where}: {err.str()}")

        send = functools.partial(
            producer.produce, dlq, value=dl_value, key=key, timestamp=ts, headers=(hdrs or []) + meta, on_delivery=on_dl
        )

        def queue_full(waited: float, _where: str = where) -> str:
            return (
                f"flow={plan.flow} {_where}: the producer's queue is full; the record has waited {waited:.0f}s "
                f"to go to dead-letter topic {dlq} ({len(producer)} in the producer; librdkafka fails them "
                f"after delivery.timeout.ms={delivery_timeout_ms(plan)}): {target_text(producer, dlq)}"
            )

        outstanding[n] = where
        try:
            send()
        except BufferError:
            produce_when_room(producer, send, queue_full, plan.flush_timeout_s, serving)
        w.dead_lettered += 1
        log.warning("flow=%s %s sent to dead-letter topic %s: %s", plan.flow, where, dlq, reason)

    def waiting(remaining: int, waited: float) -> str:
        held = list(outstanding.values())
        try:
            target = target_text(producer, dlq)
        except Exception as exc:  # noqa: BLE001 - the warning must not fail the wait
            target = f"{dlq}: metadata unavailable ({exc})"
        return (
            f"flow={plan.flow}: {len(held)} records for dead-letter topic {dlq} not yet acknowledged by the "
            f"target after {waited:.0f}s (giving up at {plan.flush_timeout_s:.0f}s): "
            + ", ".join(held[:5])
            + (f" and {len(held) - 5} more" if len(held) > 5 else "")
            + f" -> {target}"
        )

    remaining = flush_within(producer, plan.flush_timeout_s, lambda: not outstanding, waiting, serving)
    if remaining is not None or dlq_errors:
        raise WriteError(
            f"flow={plan.flow}: could not write to dead-letter topic {dlq}: "
            + ("; ".join(dlq_errors[:3]) or f"{remaining} records unacknowledged"),
            terminal=False,
        )
    return False


def finish_segments(plan: WritePlan, parts: Sequence[PartitionWrite]) -> None:
    """Turn each partition's acknowledged (upstream, downstream) pairs into segments."""
    check_report_order(plan, parts)
    for w in parts:
        us = w.acknowledged()
        if not us:
            w.segments = []
            continue
        # Both rise: upstream offsets in produce order (the sink hands each over once, above the last),
        # target offsets in report order (checked above). So the pairs are in order already, and a
        # partition whose offsets both advance by one throughout (the common case) is one segment.
        ds = w.ds
        n = len(us)
        if len(ds) == n and us[-1] - us[0] == n - 1 and ds[-1] - ds[0] == n - 1:
            segs = [Segment(w.topic, w.partition, us[0], ds[0], n)]
        else:
            segs = segments_from_offsets(w.topic, w.partition, us, ds)
        tail = plan.tails.get((w.topic, w.partition))
        if segs and tail is not None:
            first = segs[0]
            (u, d, n), *_ = extend_tail([(first.upstream_start, first.downstream_start, first.count)], tail)
            segs[0] = Segment(w.topic, w.partition, u, d, n)
        w.segments = segs
