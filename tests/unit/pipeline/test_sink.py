"""The sink's work without a broker: the size bound, and the pairing of delivery reports with
upstream offsets (report order = produce order, verified)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from source_messages import SourceMessage, records
from sparkmirror.core.policy import DefaultReplicationPolicy
from sparkmirror.pipeline.exceptions import WriteError
from sparkmirror.pipeline.executor import sink as sink_module
from sparkmirror.pipeline.executor.plan import Record, WritePlan
from sparkmirror.pipeline.executor.sink import (
    PartitionWrite,
    Sink,
    check_report_order,
    finish_segments,
    record_size,
    settle_record_failures,
)

#: Keys and headers of records (as the task's consumer hands them over).
CASES = [
    [(b"k", [("a", b"1")]), (None, [("b", None)])],  # one header each
    [(b"k", [("a", b"1"), ("c", b"22")]), (b"k", []), (b"k", None), (None, [("d", b"x")])],
    [(b"k", None), (None, None)],
    [(b"k", [("a", b"1"), ("b", b"2")]), (None, [])],
]


@pytest.mark.parametrize("rows", CASES)
def test_a_record_over_the_limit_is_refused_before_it_is_sent(rows: list[tuple[bytes | None, Any]]) -> None:
    class Never:
        def produce(self, *_a: Any, **_k: Any) -> None:
            raise AssertionError("a record over the limit reached the producer")

        def poll(self, _t: float = 0) -> int:
            return 0

    class Commit:
        serving = threading.Lock()

        def producer_for(self, _p: Any) -> Any:
            return Never()

        def group_of(self, _p: Any) -> None:
            return None

        def open(self, _parts: Any) -> None:
            pass

        def begin(self, w: PartitionWrite) -> None:
            w.begun = True

    for key, headers in rows:
        limit = record_size(key, b"vv", headers) - 1
        plan = WritePlan(
            flow="A->B",
            source_alias="A",
            policy=DefaultReplicationPolicy(),
            producer_config={},
            max_record_bytes={"A.t": limit},
        )
        sink = Sink(plan, Commit())  # type: ignore[arg-type]
        sink.write(("t", 0), [SourceMessage(o=7, k=key, v=b"vv", hdrs=headers).record()])
        w = sink.parts[("t", 0)]
        assert [f[0] for f in w.record_failures] == [7] and w.local_refusals == 1


class _Err:
    def __init__(self, name: str) -> None:
        self._name = name

    def name(self) -> str:
        return self._name

    def str(self) -> str:
        return self._name.lower()


def _report(offset: int) -> SourceMessage:
    """A delivery report's message: the record, at its target offset."""
    return SourceMessage(o=offset, ts=5)


def _plan() -> WritePlan:
    return WritePlan(flow="A->B", source_alias="A", policy=DefaultReplicationPolicy(), producer_config={})


def test_reports_pair_with_upstream_offsets_in_produce_order() -> None:
    w = PartitionWrite("t", "A.t", 0, None, None)  # type: ignore[arg-type]
    w.sent = [10, 11, 12, 13]
    w.first_offset, w.last_offset = 10, 13
    w.delivered(None, _report(100))
    w.delivered(_Err("MSG_SIZE_TOO_LARGE"), _report(-1))
    assert w.pending == 2
    w.delivered(None, _report(101))
    w.delivered(None, _report(102))
    assert w.pending == 0
    assert w.acknowledged() == [10, 12, 13] and w.ds == [100, 101, 102]
    assert [f[0] for f in w.record_failures] == [11]
    assert (w.first_target, w.last_target) == (100, 102)
    finish_segments(_plan(), [w])
    assert [(s.upstream_start, s.downstream_start, s.count) for s in w.segments] == [(10, 100, 1), (12, 101, 2)]


def test_reports_out_of_produce_order_fail_the_batch() -> None:
    w = PartitionWrite("t", "A.t", 0, None, None)  # type: ignore[arg-type]
    w.sent = [10, 11]
    w.delivered(None, _report(101))
    w.delivered(None, _report(100))
    with pytest.raises(WriteError, match="out of produce order"):
        check_report_order(_plan(), [w])


def test_zip_directories_are_kept_between_tasks(tmp_path: Any) -> None:
    import importlib
    import sys
    import zipfile
    import zipimport

    from sparkmirror.pipeline.executor.tasks import keep_zip_directories

    archive = tmp_path / "pkgs.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("zipped_mod_for_test.py", "X = 1\n")
    original = zipimport.zipimporter.invalidate_caches
    sys.path.insert(0, str(archive))
    try:
        importlib.import_module("zipped_mod_for_test")  # the path now has a zipimporter
        reads: list[str] = []
        real_read = zipimport._read_directory  # type: ignore[attr-defined]
        zipimport._read_directory = lambda path: reads.append(path) or real_read(path)  # type: ignore[attr-defined]
        try:
            importlib.invalidate_caches()  # what PySpark does before every task
            assert reads == [str(archive)], "this Python re-reads zip directories on invalidate_caches"
            keep_zip_directories()
            keep_zip_directories()  # idempotent
            reads.clear()
            importlib.invalidate_caches()
            assert reads == []
        finally:
            zipimport._read_directory = real_read  # type: ignore[attr-defined]
    finally:
        sys.path.remove(str(archive))
        sys.modules.pop("zipped_mod_for_test", None)
        zipimport.zipimporter.invalidate_caches = original  # type: ignore[method-assign]


# The sink's own waits on the target: a full local queue (the target does not acknowledge) and the
# dead-letter topic's flush. Fakes of the producer only; the broker-side case is
# tests/e2e/test_broker_faults.py.

SECRET = "hunter2-not-for-logs"


def _metadata(topic: str, partitions: int = 1) -> Any:
    from types import SimpleNamespace

    return SimpleNamespace(
        brokers={
            2: SimpleNamespace(id=2, host="127.0.0.1", port=9094),
            3: SimpleNamespace(id=3, host="127.0.0.1", port=9096),
        },
        topics={
            topic: SimpleNamespace(
                partitions={p: SimpleNamespace(leader=2, isrs=[3, 2], error=None) for p in range(partitions)},
                error=None,
            )
        },
    )


class QueueFullProducer:
    """Takes ``capacity`` records, then refuses more (``BufferError``) until ``frees_after_polls``
    polls have served delivery reports; acknowledges nothing by itself."""

    def __init__(self, capacity: int, frees_after_polls: int) -> None:
        self.capacity = capacity
        self.frees_after_polls = frees_after_polls
        self.queued: list[tuple[str, int, Any]] = []
        self.full = False
        self.polls_while_full = 0

    def produce(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int = -1,
        callback: Any = None,
        on_delivery: Any = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None:
        # librdkafka's signature: Sink.write passes the delivery callback by position (the callback slot).
        self.full = len(self.queued) >= self.capacity and self.polls_while_full < self.frees_after_polls
        if self.full:
            raise BufferError("Local: Queue full")
        self.queued.append((topic, partition, callback or on_delivery))

    def flush(self, _timeout: float = -1) -> int:
        for i, (_topic, _partition, on_delivery) in enumerate(self.queued):
            on_delivery(None, _report(i))
        self.queued.clear()
        return 0

    def poll(self, timeout: float = 0) -> int:
        if self.full:
            self.polls_while_full += 1
            time.sleep(timeout)
        return 0

    def list_topics(self, topic: str, timeout: float = -1) -> Any:
        return _metadata(topic)

    def __len__(self) -> int:
        return len(self.queued)


class _OneProducer:
    def __init__(self, producer: Any) -> None:
        self.producer = producer
        self.serving = threading.Lock()

    def producer_for(self, _p: Any) -> Any:
        return self.producer

    def group_of(self, _p: Any) -> None:
        return None

    def open(self, _parts: Any) -> None:
        pass

    def begin(self, w: PartitionWrite) -> None:
        w.begun = True


def _secret_plan(**kw: Any) -> WritePlan:
    return WritePlan(
        flow="A->B",
        source_alias="A",
        policy=DefaultReplicationPolicy(),
        producer_config={"sasl.password": SECRET, "delivery.timeout.ms": "120000"},
        **kw,
    )


def _records(offsets: range) -> list[Record]:
    return records("t", 0, offsets)


def test_a_full_producer_queue_says_what_it_waits_for_every_interval(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sink_module, "WARN_EVERY_S", 0.2)
    producer = QueueFullProducer(capacity=3, frees_after_polls=14)  # 14 polls of 50 ms: full for 0.7 s
    sink = Sink(_secret_plan(), _OneProducer(producer))  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="sparkmirror"):
        sink.write(("t", 0), _records(range(100, 104)))
    assert sink.parts[("t", 0)].sent == [100, 101, 102, 103], "the record waited for is written once the queue frees"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert 2 <= len(warnings) <= 4, warnings  # one per interval of the wait, not one per poll
    for text in warnings:
        assert text.startswith("flow=A->B t[0] offsets 100..102: the producer's queue is full; offset 103 has waited")
        assert "3 of t[0] -> A.t[0] leader broker 2, in sync [2, 3]" in text
        assert "brokers 2 (127.0.0.1:9094), 3 (127.0.0.1:9096)" in text
        assert "delivery.timeout.ms=120000" in text
    assert SECRET not in caplog.text


def test_a_producer_queue_that_never_frees_fails_the_task_past_the_flush_limit_saying_why(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sink_module, "WARN_EVERY_S", 0.2)
    producer = QueueFullProducer(capacity=3, frees_after_polls=100)  # full for 5 s, far past the limit
    sink = Sink(_secret_plan(flush_timeout_s=0.5), _OneProducer(producer))  # type: ignore[arg-type]
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="sparkmirror"), pytest.raises(WriteError) as raised:
        sink.write(("t", 0), _records(range(100, 104)))
    assert 0.5 <= time.monotonic() - started < 3
    assert raised.value.retriable
    text = str(raised.value)
    assert text.startswith("flow=A->B t[0] offsets 100..102: the producer's queue is full; offset 103 has waited")
    assert "A.t[0] leader broker 2" in text and "giving up after 0.5s: the task fails" in text
    assert sink.parts[("t", 0)].sent == [100, 101, 102], "the record that never fitted is not counted as sent"
    assert SECRET not in text and SECRET not in caplog.text


def test_a_producer_queue_that_frees_quickly_says_nothing(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sink_module, "WARN_EVERY_S", 0.5)
    producer = QueueFullProducer(capacity=3, frees_after_polls=2)  # free again after 0.1 s
    sink = Sink(_secret_plan(), _OneProducer(producer))  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="sparkmirror"):
        sink.write(("t", 0), _records(range(100, 104)))
    assert producer.polls_while_full == 2
    assert sink.parts[("t", 0)].sent == [100, 101, 102, 103]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_records_that_fit_the_producer_queue_read_no_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[float] = []

    class Clock:
        @staticmethod
        def monotonic() -> float:
            reads.append(0.0)
            return time.monotonic()

        @staticmethod
        def time() -> float:
            return time.time()

    monkeypatch.setattr(sink_module, "time", Clock)
    producer = QueueFullProducer(capacity=10_000, frees_after_polls=0)
    sink = Sink(_secret_plan(), _OneProducer(producer))  # type: ignore[arg-type]
    sink.write(("t", 0), _records(range(5_000)))
    assert len(sink.parts[("t", 0)].sent) == 5_000
    assert reads == [], "the hot path reads the clock only once the queue is full"


class SlowAcksProducer:
    """Acknowledges what it holds ``acks_after_s`` after it is first flushed; a flush waits at most its timeout."""

    def __init__(self, acks_after_s: float) -> None:
        self.acks_after_s = acks_after_s
        self.acks_at: float | None = None
        self.queued: list[Any] = []

    def produce(self, topic: str, value: Any = None, key: Any = None, on_delivery: Any = None, **_kw: Any) -> None:
        self.queued.append(on_delivery)

    def flush(self, timeout: float = -1) -> int:
        if self.acks_at is None:
            self.acks_at = time.monotonic() + self.acks_after_s
        wait = self.acks_at - time.monotonic()
        if 0 <= timeout < wait:
            time.sleep(timeout)
            return len(self.queued)
        time.sleep(max(0.0, wait))
        for i, on_delivery in enumerate(self.queued):
            on_delivery(None, _report(i))
        self.queued.clear()
        return 0

    def poll(self, _timeout: float = 0) -> int:
        return 0

    def list_topics(self, topic: str, timeout: float = -1) -> Any:
        return _metadata(topic, partitions=2)

    def __len__(self) -> int:
        return len(self.queued)


def _refused(producer: Any, *offsets: int) -> PartitionWrite:
    w = PartitionWrite("t", "A.t", 0, producer, None)
    w.record_failures = [(o, (o, b"k", b"v", 1, None), "MSG_SIZE_TOO_LARGE: too large") for o in offsets]
    return w


def _waits(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "not yet acknowledged" in r.getMessage()]


def test_a_dead_letter_flush_says_what_it_waits_for_every_interval(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sink_module, "WARN_EVERY_S", 0.2)
    monkeypatch.setattr(sink_module, "_FLUSH_SLICE_S", 0.05)
    producer = SlowAcksProducer(acks_after_s=0.7)
    w = _refused(producer, 5, 9)
    plan = _secret_plan(errors_tolerance="all", dead_letter_topic="dlq")
    with caplog.at_level(logging.WARNING, logger="sparkmirror"):
        assert settle_record_failures(producer, plan, [w]) is False  # type: ignore[arg-type]
    assert w.dead_lettered == 2
    warnings = _waits(caplog)
    assert 2 <= len(warnings) <= 4, warnings
    for text in warnings:
        assert text.startswith(
            "flow=A->B: 2 records for dead-letter topic dlq not yet acknowledged by the target after"
        )
        assert "(giving up at 300s): t[0] offset=5, t[0] offset=9 -> dlq[0] leader broker 2, in sync [2, 3]; " in text
        assert "dlq[1] leader broker 2, in sync [2, 3]; brokers 2 (127.0.0.1:9094), 3 (127.0.0.1:9096)" in text
    assert SECRET not in caplog.text


def test_a_dead_letter_flush_acknowledged_quickly_says_nothing_of_waiting(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sink_module, "WARN_EVERY_S", 0.5)
    monkeypatch.setattr(sink_module, "_FLUSH_SLICE_S", 0.05)
    producer = SlowAcksProducer(acks_after_s=0.1)
    w = _refused(producer, 5, 9)
    with caplog.at_level(logging.WARNING, logger="sparkmirror"):
        settle_record_failures(producer, _secret_plan(errors_tolerance="all", dead_letter_topic="dlq"), [w])  # type: ignore[arg-type]
    assert w.dead_lettered == 2 and producer.queued == []
    assert _waits(caplog) == []
    assert [r.getMessage() for r in caplog.records] == [
        "flow=A->B t[0] offset=5 sent to dead-letter topic dlq: MSG_SIZE_TOO_LARGE: too large",
        "flow=A->B t[0] offset=9 sent to dead-letter topic dlq: MSG_SIZE_TOO_LARGE: too large",
    ]


def test_a_dead_letter_flush_past_its_limit_fails_the_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sink_module, "_FLUSH_SLICE_S", 0.05)
    producer = SlowAcksProducer(acks_after_s=10)
    plan = _secret_plan(errors_tolerance="all", dead_letter_topic="dlq", flush_timeout_s=0.3)
    started = time.monotonic()
    with pytest.raises(
        WriteError, match="could not write to dead-letter topic dlq: 2 records unacknowledged"
    ) as raised:
        settle_record_failures(producer, plan, [_refused(producer, 5, 9)])  # type: ignore[arg-type]
    assert raised.value.retriable and time.monotonic() - started < 2


def test_a_full_queue_under_the_dead_letter_topic_says_what_it_waits_for(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sink_module, "WARN_EVERY_S", 0.2)
    producer = QueueFullProducer(capacity=1, frees_after_polls=14)  # the second record waits 0.7 s
    w = _refused(producer, 5, 9)
    with caplog.at_level(logging.WARNING, logger="sparkmirror"):
        settle_record_failures(producer, _secret_plan(errors_tolerance="all", dead_letter_topic="dlq"), [w])  # type: ignore[arg-type]
    assert w.dead_lettered == 2
    warnings = [r.getMessage() for r in caplog.records if "queue is full" in r.getMessage()]
    assert 2 <= len(warnings) <= 4, warnings
    for text in warnings:
        assert text.startswith("flow=A->B t[0] offset=9: the producer's queue is full; the record has waited")
        assert "to go to dead-letter topic dlq (1 in the producer; librdkafka fails them after" in text
        assert "dlq[0] leader broker 2, in sync [2, 3]; brokers 2 (127.0.0.1:9094)" in text
    assert SECRET not in caplog.text


class _Recording:
    """Takes every record and keeps what it was asked to produce (no acknowledgement)."""

    def __init__(self) -> None:
        self.produced: list[tuple[Any, ...]] = []

    def produce(self, *args: Any) -> None:
        self.produced.append(args)

    def poll(self, _timeout: float = 0) -> int:
        return 0


def test_the_sink_writes_each_record_once_with_its_fields_a_missing_timestamp_left_to_the_producer() -> None:
    producer = _Recording()
    sink = Sink(_plan(), _OneProducer(producer))  # type: ignore[arg-type]
    headers = [("h", b"1")]
    run = [
        SourceMessage(o=5, k=None, v=b"abc", ts=-1, hdrs=headers).record(),
        SourceMessage(o=6, k=b"kk", v=None, ts=0).record(),
        SourceMessage(o=7, ts=1_700_000_000_000).record(),
    ]
    assert not sink.written
    assert sink.write(("t", 0), run) == 3 + 2 + 2  # key and value bytes handed over
    assert sink.written
    # (topic, value, key, partition, on_delivery, callback, timestamp, headers), by position
    assert [(p[0], p[1], p[2], p[3], p[6], p[7]) for p in producer.produced] == [
        ("A.t", b"abc", None, 0, 0, headers),
        ("A.t", None, b"kk", 0, 0, None),
        ("A.t", b"v", b"k", 0, 1_700_000_000_000, None),
    ]
    # handed over again (a read after a seek): nothing is produced twice
    assert sink.write(("t", 0), run[1:]) == 0 and len(producer.produced) == 3
    w = sink.parts[("t", 0)]
    assert (w.first_offset, w.last_offset, w.sent) == (5, 7, [5, 6, 7])
    assert (w.min_ts, w.max_ts) == (0, 1_700_000_000_000)
    sealed = sink.seal()
    assert [s.partition for s in sealed] == [0] and not sink.written, "sealed: nothing written since"
    assert sink.seal() == [] and not sink.written
    sink.write(("t", 0), [SourceMessage(o=8).record()])
    assert sink.written and sink.parts[("t", 0)].sent == [8]


@pytest.mark.parametrize(
    ("sent", "ds", "segments"),
    [
        ([10, 11, 12], [100, 101, 102], [(10, 100, 3)]),  # both advance by one: one segment
        ([10, 11, 12], [100, 101, 105], [(10, 100, 2), (12, 105, 1)]),  # a gap on the target
        ([10, 12, 13], [100, 101, 102], [(10, 100, 1), (12, 101, 2)]),  # a gap on the source
        ([7], [3], [(7, 3, 1)]),
    ],
)
def test_segments_pair_offsets_in_produce_order(sent: list[int], ds: list[int], segments: list[Any]) -> None:
    w = PartitionWrite("t", "A.t", 0, None, None)  # type: ignore[arg-type]
    w.sent = list(sent)
    for d in ds:
        w.delivered(None, _report(d))
    finish_segments(_plan(), [w])
    assert [(s.upstream_start, s.downstream_start, s.count) for s in w.segments] == segments


def test_a_record_s_latency_ends_at_its_acknowledgement_at_least_once_at_the_commit_exactly_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """MM2's replication latency: at least once a record is final when the target acknowledges it, not
    when its commit interval ends (a longer interval must not read as a slower copy)."""
    epoch = sink_module._ACKS_EPOCH_S_INT
    acks = iter([epoch + 1.0, epoch + 1.01])  # the reports come 1,000 and 1,010 ms past the epoch

    class Clock:
        @staticmethod
        def time() -> float:
            return next(acks)

    monkeypatch.setattr(sink_module, "time", Clock)
    w = PartitionWrite("t", "A.t", 0, None, None)  # type: ignore[arg-type]
    w.sent = [10, 11]
    w.first_offset, w.last_offset = 10, 11
    base = epoch * 1000
    w.ts_sum = (base + 900) + (base + 905)  # the records' timestamps
    w.delivered(None, _report(100))
    w.delivered(None, _report(101))
    w.acked_at_ms = base + 2_000  # the interval's end
    acked, committed = w.result(), w.result(committed=True)
    assert (acked.latency_sum_ms, acked.acked_at_ms) == ((1_000 - 900) + (1_010 - 905), base + 1_010)
    assert (committed.latency_sum_ms, committed.acked_at_ms) == (2 * 2_000 - 900 - 905, base + 2_000)
    # A third record dead-lettered (and a fourth refused before it was sent): final at the interval's end.
    w.sent.append(12)
    w.local_refusals = 1
    w.ts_sum += 2 * (base + 910)
    w.delivered(_Err("MSG_SIZE_TOO_LARGE"), _report(-1))
    mixed = w.result()
    assert mixed.acked_at_ms == base + 2_000
    assert mixed.latency_sum_ms == (1_000 - 900) + (1_010 - 905) + 2 * (2_000 - 910)


def test_the_sink_reports_latency_by_the_plan_s_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sink.finish takes a record's latency to its acknowledgement at least once, to the commit exactly once."""

    class Commit(_OneProducer):
        def finish(self, _parts: Any) -> None:
            pass

    for exactly_once in (False, True):
        sink = Sink(_secret_plan(exactly_once=exactly_once), Commit(None))  # type: ignore[arg-type]
        w = sink.parts[("t", 0)] = PartitionWrite("t", "A.t", 0, None, None)  # type: ignore[arg-type]
        w.sent, w.first_offset, w.last_offset, w.ts_sum = [10], 10, 10, 0
        monkeypatch.setattr(sink_module.time, "time", lambda: sink_module._ACKS_EPOCH_S + 1.0)
        w.delivered(None, _report(100))
        monkeypatch.setattr(sink_module.time, "time", lambda: sink_module._ACKS_EPOCH_S + 5.0)
        (result,) = sink.finish([w])
        at = sink_module._ACKS_EPOCH_S_INT * 1000 + (5_000 if exactly_once else 1_000)
        assert result.acked_at_ms == at and result.latency_sum_ms == at


class _KeepsValues:
    """A producer that keeps the values it was handed and counts its polls; it acknowledges nothing."""

    def __init__(self) -> None:
        self.values: list[bytes] = []
        self.polls = 0
        self.unreported = 0

    def produce(self, _topic: str, value: bytes, *_rest: Any) -> None:
        self.values.append(value)

    def poll(self, _timeout: float = 0) -> int:
        self.polls += 1
        return 0

    def __len__(self) -> int:
        return self.unreported


class _Groups:
    """Exactly once's shape: a group, a producer and a transaction per source partition of ``t``."""

    def __init__(self) -> None:
        self.serving = threading.Lock()
        self.producers = {"g0": _KeepsValues(), "g1": _KeepsValues()}

    def group_of(self, key: Any) -> str:
        return f"g{key[1]}"

    def producer_for(self, key: Any) -> Any:
        return self.producers[self.group_of(key)]

    def open(self, _parts: Any) -> None:
        pass

    def begin(self, w: PartitionWrite) -> None:
        w.begun = True

    def finish(self, _parts: Any) -> None:
        pass


def test_exactly_once_a_finishing_groups_records_are_held_then_written_in_order_before_any_later_one() -> None:
    """Sink.seal_groups hands each group over on its own. Until its release, a finishing group's new records
    are held (its next transaction cannot begin before this one ends) and its producer is left to its finish
    (no delivery report of a partition runs in two threads); the other group's go on. Released, the held
    records are written first, in the order read."""
    commit = _Groups()
    p0, p1 = commit.producers["g0"], commit.producers["g1"]
    sink = Sink(_secret_plan(exactly_once=True), commit)  # type: ignore[arg-type]

    def rec(o: int) -> Any:
        return SourceMessage(o=o, v=b"v%d" % o).record()

    sink.write(("t", 0), [rec(0), rec(1)])
    sink.write(("t", 1), [rec(0)])
    groups = sink.seal_groups()
    assert {g: [w.last_offset for w in ws] for g, ws in groups.items()} == {"g0": [1], "g1": [0]}
    assert sink.write(("t", 0), [rec(2)]) == 3 and sink.write(("t", 1), [rec(1)]) == 3  # key and value bytes
    sink.write(("t", 0), [rec(3)])
    assert (p0.values, p1.values, sink.held, sink.written) == ([b"v0", b"v1"], [b"v0"], 3, False)
    sink.serve()
    assert (p0.polls, p1.polls) == (0, 0)  # both groups' producers are their finishes' to serve
    p1.unreported = 1
    assert not sink.unserved()  # nor does the loop wait for their delivery reports

    assert sink.release_group("g1") == 1
    assert (p0.values, p1.values, sink.held, sink.written) == ([b"v0", b"v1"], [b"v0", b"v1"], 2, True)
    sink.serve()
    assert (p0.polls, p1.polls) == (0, 1) and sink.unserved()
    sink.write(("t", 0), [rec(4)])  # still held: after 2 and 3
    assert sink.release_group("g0") == 3
    assert p0.values == [b"v0", b"v1", b"v2", b"v3", b"v4"] and sink.held == 0
    assert {g: [w.last_offset for w in ws] for g, ws in sink.seal_groups().items()} == {"g0": [4], "g1": [1]}
