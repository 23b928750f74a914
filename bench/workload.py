"""The benchmark's data: writing the workload on A, offering paced load, and reading B back.

Every record carries a unique key, ``b"%012d" % seq`` (throughput workload) or
``b"L%011d" % seq`` (latency load), written to partition ``seq % partitions`` in
order, so a record's offset on A is ``seq // partitions`` and B can be checked
record by record. Latency records carry their source timestamp (the record's
timestamp on A, in ms) in the first 8 bytes of the value as well, because the
remote topics on B use ``message.timestamp.type=LogAppendTime``: the timestamp
a record has on B is the moment B appended it.

Nothing here starts or stops a replicator.
"""

from __future__ import annotations

import bisect
import random
import struct
import time
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

#: Headers every record carries (the workload has "one header").
HEADERS = [("bench", b"sparkmirror")]
_TS = struct.Struct(">q")
#: Confluent's timestamp type for LogAppendTime.
TIMESTAMP_LOG_APPEND_TIME = 2


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})


def _producer(bootstrap: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 500_000,
        }
    )


def create_topic(bootstrap: str, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
    """Create a topic, retrying while a deletion of the same name is still in progress."""
    client = admin(bootstrap)
    deadline = time.monotonic() + 300
    while True:
        try:
            client.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result()
            return
        except KafkaException as exc:
            if time.monotonic() > deadline or "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise
            time.sleep(0.5)


def delete_topics(bootstrap: str, keep: Iterable[str] = ()) -> list[str]:
    """Delete every topic but Kafka's own (``__*``) and ``keep``; wait until they are gone."""
    client = admin(bootstrap)
    keep = set(keep)
    names = [t for t in client.list_topics(timeout=30).topics if not t.startswith("__") and t not in keep]
    if names:
        for fut in client.delete_topics(names, operation_timeout=60).values():
            try:
                fut.result()
            except KafkaException as exc:
                if "UNKNOWN_TOPIC" not in str(exc):
                    raise
    # At 1,000 partitions a deletion takes longer than a minute; a topic re-created before it is gone
    # fails with TOPIC_ALREADY_EXISTS, so wait it out and say so if it never ends.
    deadline = time.monotonic() + 300
    while True:
        left = set(names) & set(client.list_topics(timeout=30).topics)
        if not left:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(left)} topics still listed 300s after their deletion, e.g. {sorted(left)[:3]}")
        time.sleep(0.5)
    return names


def delete_groups(bootstrap: str, keep: Iterable[str] = ()) -> None:
    client = admin(bootstrap)
    keep = set(keep)
    groups = [
        g.group_id for g in client.list_consumer_groups(request_timeout=30).result().valid if g.group_id not in keep
    ]
    if groups:
        for fut in client.delete_consumer_groups(groups, request_timeout=30).values():
            try:
                fut.result()
            except KafkaException:
                pass  # a group with members (none here) or already gone


def _produce(producer: Producer, topic: str, **kwargs: Any) -> None:
    while True:
        try:
            producer.produce(topic, **kwargs)
            return
        except BufferError:
            producer.poll(0.05)


def _check(errors: list[Any], what: str) -> None:
    if errors:
        raise RuntimeError(f"{what}: {len(errors)} records failed, first: {errors[0]}")


def load(bootstrap: str, topic: str, records: int, partitions: int, size: int, seed: int) -> None:
    """Write the throughput workload: ``records`` records of ``size`` value bytes, keys and one header."""
    rnd = random.Random(seed)
    errors: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    producer = _producer(bootstrap)
    for seq in range(records):
        _produce(
            producer,
            topic,
            key=b"%012d" % seq,
            value=rnd.randbytes(size),
            partition=seq % partitions,
            headers=HEADERS,
            on_delivery=on_delivery,
        )
        if seq % 10_000 == 0:
            producer.poll(0)
    producer.flush(300)
    _check(errors, f"loading {topic}")


@dataclass
class Offered:
    """What a paced producer did."""

    records: int
    seconds: float
    #: Largest delay of a record's produce() behind its schedule, in ms.
    max_behind_ms: float

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0


def offer(
    bootstrap: str, topic: str, partitions: int, size: int, *, first_seq: int, rate: float, seconds: float, seed: int
) -> Offered:
    """Produce ``rate`` records/s for ``seconds``, each stamped with the time it was handed to the producer.

    Record n is due at start + n / rate; the loop produces what is due, then
    sleeps a millisecond. If the machine starves it, records go out late (and
    the lateness is reported), never early.
    """
    rnd = random.Random(seed)
    errors: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    producer = _producer(bootstrap)
    total = int(rate * seconds)
    filler = rnd.randbytes(max(size - _TS.size, 0))
    start = time.monotonic()
    sent, max_behind = 0, 0.0
    while sent < total:
        now = time.monotonic()
        due = min(total, int((now - start) * rate) + 1)
        if due > sent:
            max_behind = max(max_behind, (now - (start + sent / rate)) * 1000)
        while sent < due:
            seq = first_seq + sent
            ts = int(time.time() * 1000)
            _produce(
                producer,
                topic,
                key=b"L%011d" % seq,
                value=_TS.pack(ts) + filler,
                partition=seq % partitions,
                timestamp=ts,
                headers=HEADERS,
                on_delivery=on_delivery,
            )
            sent += 1
        producer.poll(0)
        time.sleep(0.001)
    elapsed = time.monotonic() - start
    producer.flush(120)
    _check(errors, f"offering load on {topic}")
    return Offered(records=sent, seconds=elapsed, max_behind_ms=round(max_behind, 1))


#: Answers of a topic a replicator has just created, while its partition leaders are elected.
_SETTLING = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        # "Local: Unknown partition": the client's metadata does not list the partition yet (MM2 at
        # 1,000 partitions: the remote topics are created while the harness already asks).
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._UNKNOWN_TOPIC,
    }
)


def end_offsets(bootstrap: str, topic: str, partitions: int, *, settle_s: float = 30.0) -> list[int]:
    """High watermarks of every partition (transaction markers included).

    A remote topic asked about right after its creation may answer NOT_LEADER_FOR_PARTITION for a moment
    (it failed a run of MM2 once): such answers are asked again for up to ``settle_s``.
    """
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks", "log_level": 3})
    deadline = time.monotonic() + settle_s
    try:
        while True:
            try:
                return [
                    c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
                    for p in range(partitions)
                ]
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if not isinstance(err, KafkaError) or err.code() not in _SETTLING or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        c.close()


@dataclass
class Scan:
    """A topic on B read back to its end with read_committed."""

    partitions: int
    records: int = 0
    #: Distinct sequence numbers seen (keys are unique per record).
    distinct: int = 0
    first_append_ms: int | None = None
    last_append_ms: int | None = None
    #: Records whose timestamp is not the broker's append time (the check of the set-up).
    not_append_time: int = 0
    #: Per partition: downstream offsets and the source sequence number at each, in order.
    offsets: list[array[int]] = field(default_factory=list)
    seqs: list[array[int]] = field(default_factory=list)
    #: B's append time minus the source timestamp, per latency record, in ms.
    latencies_ms: array[int] = field(default_factory=lambda: array("q"))
    #: Source timestamps of the latency records, in the order of latencies_ms.
    source_ms: array[int] = field(default_factory=lambda: array("q"))

    @property
    def duplicates(self) -> int:
        return self.records - self.distinct


def scan(
    bootstrap: str, topic: str, partitions: int, *, latency_from: int | None = None, timeout_s: float = 600
) -> Scan:
    """Read every committed record of ``topic`` on B; keep what the checks need.

    With ``latency_from``, the latency of every record whose sequence number is at
    least that (the measured load, not the warm-up) is kept as well.
    """
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-scan",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "log_level": 3,
        }
    )
    result = Scan(
        partitions, offsets=[array("q") for _ in range(partitions)], seqs=[array("q") for _ in range(partitions)]
    )
    seen = bytearray()
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    done: set[int] = set()
    deadline = time.monotonic() + timeout_s
    first, last = None, None
    try:
        while len(done) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic} back did not reach its end in {timeout_s:.0f}s")
            for m in c.consume(10_000, 1.0):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        done.add(m.partition() or 0)
                        continue
                    raise KafkaException(err)
                key, p = m.key(), m.partition()
                assert key is not None and p is not None, "every benchmark record has a key"
                seq = int(key[1:]) if key[:1] == b"L" else int(key)
                result.offsets[p].append(m.offset() or 0)
                result.seqs[p].append(seq)
                if seq >= len(seen):
                    seen.extend(bytes(seq + 1 - len(seen) + 65536))
                if not seen[seq]:
                    seen[seq] = 1
                    result.distinct += 1
                ts_type, ts = m.timestamp()
                if ts_type != TIMESTAMP_LOG_APPEND_TIME:
                    result.not_append_time += 1
                if first is None or ts < first:
                    first = ts
                if last is None or ts > last:
                    last = ts
                if latency_from is not None and seq >= latency_from:
                    src = _TS.unpack_from(m.value() or bytes(_TS.size))[0]
                    result.latencies_ms.append(ts - src)
                    result.source_ms.append(src)
    finally:
        c.close()
    result.records = sum(len(s) for s in result.seqs)
    result.first_append_ms, result.last_append_ms = first, last
    return result


def commit_group(bootstrap: str, group: str, topic: str, positions: dict[int, int]) -> None:
    """Commit ``positions`` (partition -> next offset to read) for an idle group on A."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, "log_level": 3})
    try:
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in positions.items()], asynchronous=False)
    finally:
        c.close()


def key_at(bootstrap: str, topic: str, partition: int, offset: int) -> bytes | None:
    """The key of the record at ``offset`` (None when there is none)."""
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-peek", "enable.auto.commit": False, "log_level": 3}
    )
    try:
        c.assign([TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                return m.key() if m.offset() == offset else None
        return None
    finally:
        c.close()


@dataclass(frozen=True)
class FailoverCount:
    """What a group resuming at translated offsets on B would re-read and skip."""

    reread: int
    skipped: int
    untranslated_partitions: int


def failover_count(b: Scan, positions: dict[int, int], translated: dict[int, int | None]) -> FailoverCount:
    """Count re-reads and skips of a group moved from A (``positions``) to B (``translated``).

    The group has read, on A, every record of partition p below ``positions[p]``
    (sequence numbers seq with seq // partitions < positions[p]). Resuming on B
    at ``translated[p]``, it reads every record of B at or after that offset:
    those it had already read are re-reads; records it had not read yet that
    appear on B only before that offset are skipped. A partition without a
    translation resumes at the earliest offset (``auto.offset.reset=earliest``),
    the safe choice; it is counted as untranslated as well.
    """
    reread = skipped = untranslated = 0
    n = b.partitions
    for p, position in positions.items():
        start = translated.get(p)
        if start is None:
            untranslated += 1
            start = 0
        idx = bisect.bisect_left(b.offsets[p], start)
        later = b.seqs[p][idx:]
        reread += sum(1 for s in later if s // n < position)
        unread_on_a = {s for s in b.seqs[p] if s // n >= position}
        skipped += len(unread_on_a - set(later))
    return FailoverCount(reread=reread, skipped=skipped, untranslated_partitions=untranslated)
