"""The direct reader's range rules without a broker: when a range is complete, what is skipped,
what fails the task. Stand-ins replace the consumer and the producer; the real clients are exercised
by the integration and e2e tiers (every mirror test runs the direct reader)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
from confluent_kafka import KafkaError

from sparkmirror.core.policy import DefaultReplicationPolicy
from sparkmirror.core.ranges import SourceRange
from sparkmirror.pipeline.exceptions import WriteError
from sparkmirror.pipeline.executor import clients, sources, tasks
from sparkmirror.pipeline.executor.plan import WritePlan


class Err:
    def __init__(self, code: int, name: str = "ERR") -> None:
        self._code, self._name = code, name

    def code(self) -> int:
        return self._code

    def fatal(self) -> bool:
        return False

    def name(self) -> str:
        return self._name

    def str(self) -> str:
        return self._name.lower()


class Msg:
    def __init__(self, topic: str, partition: int, offset: int, error: Err | None = None) -> None:
        self._t, self._p, self._o, self._e = topic, partition, offset, error

    def topic(self) -> str:
        return self._t

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def error(self) -> Err | None:
        return self._e

    def key(self) -> bytes:
        return b"k%d" % self._o

    def value(self) -> bytes:
        return b"v" * 10

    def headers(self) -> list[tuple[str, bytes]]:
        return [("h", b"1")]

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_700_000_000_000 + self._o)


class Consumer:
    """Hands out scripted message lists, one per ``consume`` call; records (un)assignments."""

    def __init__(self, script: list[list[Msg]]) -> None:
        self.script = list(script)
        self.assigned: list[tuple[str, int, int]] = []
        self.unassigned: list[tuple[str, int]] = []

    def incremental_assign(self, tps: list[Any]) -> None:
        self.assigned += [(tp.topic, tp.partition, tp.offset) for tp in tps]

    def incremental_unassign(self, tps: list[Any]) -> None:
        self.unassigned += [(tp.topic, tp.partition) for tp in tps]

    def consume(self, _n: int, _timeout: float) -> list[Msg]:
        if not self.script:
            raise AssertionError("consumed past the script: a range was not seen as complete")
        return self.script.pop(0)

    def close(self) -> None:
        pass


class Delivered:
    def __init__(self, offset: int) -> None:
        self._o = offset

    def offset(self) -> int:
        return self._o


class Producer:
    """Acknowledges every record at the next free offset of its target partition on poll/flush."""

    def __init__(self) -> None:
        self.pending: list[tuple[str, int, Any]] = []
        self.next: dict[tuple[str, int], int] = defaultdict(int)
        self.written: list[tuple[str, int, bytes]] = []

    def produce(
        self,
        topic: str,
        value: bytes,
        key: bytes,
        partition: int = -1,
        callback: Any = None,
        on_delivery: Any = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None:
        # librdkafka's signature: Sink.write passes the delivery callback by position (the callback slot).
        self.pending.append((topic, partition, callback or on_delivery))
        self.written.append((topic, partition, key))

    def poll(self, _t: float = 0) -> int:
        for topic, partition, cb in self.pending:
            cb(None, Delivered(self.next[(topic, partition)]))
            self.next[(topic, partition)] += 1
        n, self.pending = len(self.pending), []
        return n

    def flush(self, _t: float = 0) -> int:
        self.poll()
        return 0


def _plan() -> WritePlan:
    return WritePlan(flow="A->B", source_alias="A", policy=DefaultReplicationPolicy(), producer_config={})


def _run(monkeypatch: pytest.MonkeyPatch, ranges: list[SourceRange], script: list[list[Msg]]) -> Any:
    consumer, producer = Consumer(script), Producer()
    monkeypatch.setattr(clients, "source_consumer", lambda _plan: consumer)
    monkeypatch.setattr(clients, "producer", lambda _plan: producer)
    rows = {(r.topic, r.partition): r.as_row() for r in tasks.copy_ranges(ranges, _plan())}
    return rows, consumer, producer


def test_a_range_ends_at_its_last_record_and_later_records_are_not_copied(monkeypatch) -> None:
    script = [[Msg("t", 0, o) for o in range(5, 9)] + [Msg("t", 1, 0), Msg("t", 0, 9), Msg("t", 1, 1)]]
    rows, consumer, producer = _run(monkeypatch, [SourceRange("t", 0, 5, 8), SourceRange("t", 1, 0, 1)], script)
    assert rows[("t", 0)]["records"] == 3 and rows[("t", 0)]["last_offset"] == 7
    assert rows[("t", 1)]["records"] == 1
    assert [k for _t, p, k in producer.written if p == 0] == [b"k5", b"k6", b"k7"]
    assert consumer.assigned == [("t", 0, 5), ("t", 1, 0)]
    assert sorted(consumer.unassigned) == [("t", 0), ("t", 1)]
    assert rows[("t", 0)]["segments"] == [{"u": 5, "d": 0, "n": 3}]


def test_a_range_that_ends_on_markers_completes_at_the_partition_end(monkeypatch) -> None:
    # Offsets 3 and 4 are a commit marker and an aborted record: never handed over.
    eof_early = Msg("t", 0, 3, Err(KafkaError._PARTITION_EOF))  # an end below `until` is not the end
    script = [
        [Msg("t", 0, 0), Msg("t", 0, 1), Msg("t", 0, 2), eof_early],
        [],
        [Msg("t", 0, 5, Err(KafkaError._PARTITION_EOF))],
    ]
    rows, _consumer, _producer = _run(monkeypatch, [SourceRange("t", 0, 0, 5)], script)
    assert rows[("t", 0)]["records"] == 3 and rows[("t", 0)]["last_offset"] == 2


def test_records_before_the_range_are_left_alone(monkeypatch) -> None:
    script = [[Msg("t", 0, 1), Msg("t", 0, 2), Msg("t", 0, 3)]]  # 1 was fetched for an earlier task
    rows, _consumer, producer = _run(monkeypatch, [SourceRange("t", 0, 2, 4)], script)
    assert [k for _t, _p, k in producer.written] == [b"k2", b"k3"]
    assert rows[("t", 0)]["first_offset"] == 2


def test_a_missing_topic_fails_the_task_for_a_replay(monkeypatch) -> None:
    # Spark leaves a deleted topic out when it plans the replay; a topic that is only briefly
    # unknown is read again. Either way the range is not declared complete.
    script = [[Msg("gone", 0, -1, Err(KafkaError.UNKNOWN_TOPIC_OR_PART, "UNKNOWN_TOPIC_OR_PART"))]]
    with pytest.raises(WriteError, match=r"gone\[0\] offset=0: reading the source failed \(UNKNOWN_TOPIC_OR_PART"):
        _run(monkeypatch, [SourceRange("gone", 0, 0, 10)], script)


def test_a_gap_before_until_completes_at_the_next_record_past_it(monkeypatch) -> None:
    # Offsets 3..5 compacted away; the next record (6) is past the range [0, 5).
    script = [[Msg("t", 0, 0), Msg("t", 0, 1), Msg("t", 0, 2), Msg("t", 0, 6)]]
    rows, _consumer, producer = _run(monkeypatch, [SourceRange("t", 0, 0, 5)], script)
    assert [k for _t, _p, k in producer.written] == [b"k0", b"k1", b"k2"]
    assert rows[("t", 0)]["records"] == 3


def test_offsets_handed_over_again_are_not_written_twice(monkeypatch) -> None:
    script = [[Msg("t", 0, 0), Msg("t", 0, 1), Msg("t", 0, 0), Msg("t", 0, 1), Msg("t", 0, 2)]]
    _rows, _consumer, producer = _run(monkeypatch, [SourceRange("t", 0, 0, 3)], script)
    assert [k for _t, _p, k in producer.written] == [b"k0", b"k1", b"k2"]


def test_a_consumer_wide_authentication_error_fails_the_task(monkeypatch) -> None:
    script = [[Msg(None, -1, -1, Err(KafkaError._AUTHENTICATION, "_AUTHENTICATION"))]]  # type: ignore[arg-type]
    with pytest.raises(WriteError, match=r"source consumer failed \(_AUTHENTICATION"):
        _run(monkeypatch, [SourceRange("t", 0, 0, 3)], script)


def test_a_read_error_fails_the_task_naming_partition_and_offset(monkeypatch) -> None:
    script = [[Msg("t", 3, 42, Err(KafkaError.TOPIC_AUTHORIZATION_FAILED, "TOPIC_AUTHORIZATION_FAILED"))]]
    with pytest.raises(WriteError, match=r"t\[3\] offset=40: reading the source failed \(TOPIC_AUTHORIZATION_FAILED"):
        _run(monkeypatch, [SourceRange("t", 3, 40, 50)], script)


def test_a_range_that_gets_nothing_fails_after_the_stall_timeout(monkeypatch) -> None:
    monkeypatch.setattr(sources, "STALL_TIMEOUT_S", 0.0)
    with pytest.raises(WriteError, match=r"t\[0\]: no record from the source at offset 7 \(range ends at 9\)"):
        _run(monkeypatch, [SourceRange("t", 0, 7, 9)], [[], []])
