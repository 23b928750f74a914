"""Commits without a broker: exactly once, one transaction per transaction group, carrying every
partition's records, offset-map segments and progress; at least once, a task's partitions dealt among its
producers (fake producers record what they are asked)."""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import TopicPartition

from source_messages import SourceMessage, records
from sparkmirror.core.policy import DefaultReplicationPolicy
from sparkmirror.core.transactions import transaction_group
from sparkmirror.pipeline.exceptions import WriteError
from sparkmirror.pipeline.executor import clients, commit, waits
from sparkmirror.pipeline.executor import sink as sink_module
from sparkmirror.pipeline.executor.commit import Transactional
from sparkmirror.pipeline.executor.plan import WritePlan
from sparkmirror.pipeline.executor.results import PartitionResult
from sparkmirror.pipeline.executor.sink import Sink


def _report(offset: int) -> SourceMessage:
    """A delivery report's message: the record, at its target offset."""
    return SourceMessage(o=offset)


class FakeProducer:
    """Acknowledges every record at once with the next offset of its partition; logs transaction calls."""

    def __init__(self, tid: str) -> None:
        self.tid = tid
        self.calls: list[tuple[Any, ...]] = []
        self.ends: dict[tuple[str, int], int] = {}

    def produce(self, topic: str, value: Any = None, key: Any = None, partition: int = 0, callback: Any = None,
                on_delivery: Any = None, timestamp: int = 0, headers: Any = None) -> None:  # fmt: skip
        # librdkafka's signature: Sink.write passes the delivery callback by position (the callback slot).
        on_delivery = callback or on_delivery
        offset = self.ends.get((topic, partition), 0)
        self.ends[(topic, partition)] = offset + 1
        if on_delivery is not None:
            on_delivery(None, _report(offset))
        else:
            self.calls.append(("segment", topic))

    def poll(self, _timeout: float = 0) -> int:
        return 0

    def flush(self, _timeout: float = 0) -> int:
        return 0

    def begin_transaction(self) -> None:
        self.calls.append(("begin",))

    def send_offsets_to_transaction(self, positions: list[Any], _md: Any, _timeout: float) -> None:
        self.calls.append(("offsets", sorted((tp.topic, tp.partition, tp.offset) for tp in positions)))

    def commit_transaction(self, _timeout: float) -> None:
        self.calls.append(("commit",))

    def abort_transaction(self, _timeout: float) -> None:
        self.calls.append(("abort",))

    #: Records it holds not yet reported (a fake acknowledges at once: none, unless a test says so).
    held = 0
    closed = False

    def __len__(self) -> int:
        return self.held

    def close(self) -> bool:
        self.closed = True
        return True


class FakeConsumer:
    def consumer_group_metadata(self) -> object:
        return object()

    def committed(self, tps: list[Any], timeout: float) -> list[Any]:
        for tp in tps:
            tp.offset = -1001
        return tps


@pytest.fixture
def producers(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[FakeProducer]]:
    made: dict[str, list[FakeProducer]] = {}

    def transactional_producer(plan: WritePlan, partition: tuple[str, int]) -> FakeProducer:
        tid = plan.transactional_id(*partition)
        p = FakeProducer(tid)
        made.setdefault(tid, []).append(p)
        return p

    monkeypatch.setattr(clients, "transactional_producer", transactional_producer)
    monkeypatch.setattr(clients, "progress_consumer", lambda plan: FakeConsumer())
    return made


def _plan(groups: int) -> WritePlan:
    return WritePlan(
        flow="A->B",
        source_alias="A",
        target_alias="B",
        policy=DefaultReplicationPolicy(),
        producer_config={},
        exactly_once=True,
        transaction_groups=groups,
        offset_map_topic="map",
        progress_group="progress",
    )


@pytest.mark.parametrize(
    ("transport", "reads", "writes", "producers"),
    [("librdkafka", False, False, 3), ("java", True, True, 1), ("java-writes", False, True, 1)],
)
def test_the_transport_names_the_client_that_reads_and_the_one_that_writes(
    transport: str, reads: bool, writes: bool, producers: int
) -> None:
    plan = dataclasses.replace(_plan(0), exactly_once=False, partitions_per_producer=2, transport=transport)
    assert (plan.java_reads, plan.java_writes, plan.producers_for(5)) == (reads, writes, producers)


def _write(plan: WritePlan, partitions: list[tuple[str, int]]) -> Sink:
    sink = Sink(plan, commit.commit_for(plan))
    sink.open(partitions)
    for key in partitions:
        sink.write(key, records(*key, range(10, 13)))
    return sink


def _finish(sink: Sink) -> list[PartitionResult]:
    """The task's interval ends: every partition written is made final (as the streaming task does)."""
    return sink.finish(sink.seal())


def test_one_transaction_per_group_carries_every_partitions_progress(producers: dict[str, list[Any]]) -> None:
    plan = _plan(2)
    partitions = [("t", p) for p in range(6)]
    results = _finish(_write(plan, partitions))
    assert len(results) == 6 and all(r.records == 3 for r in results)
    # One producer per group, made once in the task although the group has three partitions.
    assert sorted(producers) == ["sparkmirror-A-B-#0-of-2", "sparkmirror-A-B-#1-of-2"]
    assert all(len(ps) == 1 for ps in producers.values())
    for tid, (p,) in producers.items():
        group = int(tid.split("#")[1].split("-")[0])
        mine = [q for t, q in partitions if transaction_group(t, q, 2) == group]
        kinds = [c[0] for c in p.calls]
        assert kinds == ["begin", "offsets"] + ["segment"] * len(mine) + ["commit"]
        assert p.calls[1][1] == sorted(("A.t", q, 13) for q in mine)


def test_per_partition_layout_has_a_transaction_per_partition(producers: dict[str, list[Any]]) -> None:
    _finish(_write(_plan(0), [("t", 0), ("t", 1)]))
    assert sorted(producers) == ["sparkmirror-A-B-t-0", "sparkmirror-A-B-t-1"]
    for (p,) in producers.values():
        assert [c[0] for c in p.calls] == ["begin", "offsets", "segment", "commit"]


def test_a_failed_task_aborts_each_open_group_once(producers: dict[str, list[Any]]) -> None:
    sink = _write(_plan(1), [("t", 0), ("t", 1), ("u", 0)])
    assert isinstance(sink.commit, Transactional)
    sink.abandon()
    ((p,),) = producers.values()
    assert [c[0] for c in p.calls] == ["begin", "abort"]


def test_a_send_offsets_that_never_answers_while_the_progress_group_answers_fails_the_task_early(
    producers: dict[str, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """librdkafka #5511: the producer's call waits while the group's coordinator answers a new consumer
    of the progress group; the task fails (retriable) at the probe's threshold instead of at ``target_wait_s``."""
    from confluent_kafka import KafkaError, KafkaException

    stuck = threading.Event()
    cached_asked: list[list[tuple[str, int]]] = []
    fresh_asked: list[list[tuple[str, int]]] = []

    def send_offsets(_positions: list[Any], _md: Any, _timeout: float) -> None:
        stuck.wait(30)

    class StuckAfterOpen(FakeConsumer):
        """The task's cached progress consumer: it answers the open's progress read, then waits on the old
        coordinator as long as the producer does (seen after the whole target was down)."""

        def committed(self, tps: list[Any], timeout: float) -> list[Any]:
            cached_asked.append(sorted((tp.topic, tp.partition) for tp in tps))
            if len(cached_asked) > 1:
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "no coordinator"))
            return super().committed(tps, timeout)

    cached = StuckAfterOpen()
    monkeypatch.setattr(clients, "progress_consumer", lambda plan: cached)

    def fresh_committed(_plan: WritePlan, parts: list[tuple[str, int]], timeout_s: float) -> list[Any]:
        fresh_asked.append(sorted(parts))
        return FakeConsumer().committed([TopicPartition(t, p) for t, p in parts], timeout_s)

    monkeypatch.setattr(clients, "fresh_progress_committed", fresh_committed)
    monkeypatch.setattr(FakeProducer, "send_offsets_to_transaction", lambda self, *a: send_offsets(*a), raising=False)
    monkeypatch.setattr(FakeProducer, "list_topics", lambda self, *a, **kw: object(), raising=False)
    monkeypatch.setattr(
        commit,
        "call_within",
        functools.partial(waits.call_within, probe_after_s=0.3, probe_confirm_s=0.2, nudge_every_s=0.1),
    )
    sink = _write(_plan(1), [("t", 0), ("t", 1)])
    started = time.monotonic()
    try:
        with pytest.raises(WriteError) as raised:
            _finish(sink)
    finally:
        stuck.set()
    assert time.monotonic() - started < 5, "failed at the probe's threshold, not after target_wait_s (120 s)"
    assert raised.value.retriable and "#5511" in str(raised.value) and "group progress" in str(raised.value)
    # The open (progress read) asked the cached consumer; the probe asked a new one, for the transaction's
    # own partitions (asking the cached one, which no longer answers, the task would wait out the limit).
    assert len(cached_asked) == 1 and fresh_asked and all(a == [("A.t", 0), ("A.t", 1)] for a in fresh_asked)


def test_a_producer_that_lost_every_broker_fails_its_group_before_the_offsets_call_and_is_not_aborted(
    producers: dict[str, list[Any]], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """After the whole target was down librdkafka's offsets call waited 40 s on the coordinator it knew
    before (every broker back): a group whose producer reported ``_ALL_BROKERS_DOWN`` fails the task
    (retriable) before the call, and the abandon does not ask it to abort (that may wait likewise);
    the retry's fence aborts its transaction. A producer without such a loss commits as before."""
    from confluent_kafka import KafkaError

    from sparkmirror.kafka.factory import LOGGER_NAME, BrokersWatch

    watches: list[BrokersWatch] = []
    made = clients.transactional_producer

    def watched(plan: WritePlan, partition: tuple[str, int]) -> FakeProducer:
        p = made(plan, partition)
        if id(p) not in clients._WATCHES:  # as the real one registers a librdkafka producer's error_cb
            watches.append(clients._WATCHES.setdefault(id(p), BrokersWatch(p.tid)))
        return p

    monkeypatch.setattr(clients, "transactional_producer", watched)
    monkeypatch.setattr(clients, "_WATCHES", {})
    sink = _write(_plan(1), [("t", 0), ("t", 1)])
    (watch,) = watches
    with caplog.at_level(logging.INFO, logger=LOGGER_NAME):
        watch(KafkaError(KafkaError._TRANSPORT, "Connect to ipv4#127.0.0.1:9092 failed: Connection refused"))
        assert watch.lost_at is None, "one broker's failed connect is no loss of every broker"
        watch(KafkaError(KafkaError._ALL_BROKERS_DOWN, "3/3 brokers are down"))
    # Logged as librdkafka logs an error without an error_cb; a transient one at INFO.
    assert [(r.levelno, r.getMessage()) for r in caplog.records][-2:] == [
        (logging.INFO, "ERROR [sparkmirror-A-B-#0-of-1] Local: Broker transport failure: Connect to "
         "ipv4#127.0.0.1:9092 failed: Connection refused"),
        (logging.INFO, "ERROR [sparkmirror-A-B-#0-of-1] Local: All broker connections are down: 3/3 brokers are down"),
    ]  # fmt: skip
    with pytest.raises(WriteError) as raised:
        _finish(sink)
    assert raised.value.retriable and "lost every broker" in str(raised.value) and "#5511" in str(raised.value)
    assert "t[0] offsets 10..12" in str(raised.value)
    sink.abandon()
    ((p,),) = producers.values()
    assert [c[0] for c in p.calls] == ["begin"], "no offsets call, no segments, no abort"

    # The retry's producer has lost nothing: it commits.
    _finish(_write(_plan(1), [("t", 0)]))
    assert [c[0] for c in producers["sparkmirror-A-B-#0-of-1"][-1].calls][-2:] == ["segment", "commit"]


def test_a_transactional_producer_watches_for_a_loss_of_every_broker_from_its_init_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The real registration: each transactional librdkafka producer gets a watch as its ``error_cb``; a
    loss reported while ``init_transactions`` waited (queued until the next poll) is over once it answered;
    a later one is kept; ``forget`` drops the watch with the producer."""
    from confluent_kafka import KafkaError

    from sparkmirror.kafka import factory

    class Made:
        def __init__(self, watch: Any) -> None:
            self.watch, self.queued = watch, []

        def init_transactions(self, _timeout: float) -> None:
            # The target away while it waited: librdkafka queues the report until the client is polled.
            self.queued.append(KafkaError(KafkaError._ALL_BROKERS_DOWN, "3/3 brokers are down"))

        def poll(self, _timeout: float = 0) -> int:
            while self.queued:
                self.watch(self.queued.pop(0))
            return 0

    made: list[Made] = []

    def new_producer(_conf: Any, *, watch: Any = None) -> Made:
        made.append(Made(watch))
        return made[-1]

    monkeypatch.setattr(factory, "new_producer", new_producer)
    monkeypatch.setattr(clients, "_WATCHES", {})
    monkeypatch.setattr(clients, "_CLIENTS", {})
    p = clients.transactional_producer(_plan(1), ("t", 0))
    assert p is made[0] and made[0].watch.client == "sparkmirror-A-B-#0-of-1"
    p.poll(0)
    assert clients.brokers_lost_at(p) is None, "the loss while init_transactions waited is over"
    made[0].watch(KafkaError(KafkaError._ALL_BROKERS_DOWN, "3/3 brokers are down"))
    assert clients.brokers_lost_at(p) is not None
    clients.forget(p)
    assert clients.brokers_lost_at(p) is None and not clients._WATCHES


def test_a_record_the_target_refused_inside_a_transaction_stops_the_flow_naming_its_batch() -> None:
    from sparkmirror.pipeline.executor.sink import PartitionWrite

    plan = WritePlan(flow="A->B", source_alias="A", policy=DefaultReplicationPolicy(), producer_config={})
    sent = PartitionWrite("t", "A.t", 0, None, None)  # type: ignore[arg-type]
    sent.sent = [10, 11, 12]
    sent.failed = [0, 1, 2]  # librdkafka fails the batch whole
    sent.record_failures = [(u, (u, None, b"v", 0, None), "INVALID_RECORD: x") for u in (10, 11, 12)]
    assert sink_module.refused_in_transaction(plan, [sent])
    assert sent.refusal is not None and "t[0] offsets 10..12" in sent.refusal
    assert "exactly-once cannot dead-letter it" in sent.refusal
    # Refused before sending (the size check): settled in the transaction, as at least once.
    local = PartitionWrite("t", "A.t", 1, None, None)  # type: ignore[arg-type]
    local.record_failures = [(5, (5, None, b"v", 0, None), "MSG_SIZE_TOO_LARGE: larger than max.message.bytes")]
    local.local_refusals = 1
    assert not sink_module.refused_in_transaction(plan, [local]) and local.refusal is None


class RefusingProducer(FakeProducer):
    """Refuses the records of ``t[1]`` (INVALID_RECORD), as a broker refuses a batch in a transaction;
    from then on purges what it holds (``_PURGE_QUEUE``) or, with ``state_after``, refuses new records
    locally (``_STATE``), as librdkafka does once the transaction is in error."""

    state_after = False

    def __init__(self, tid: str) -> None:
        super().__init__(tid)
        self.in_error = False

    def produce(self, topic: str, value: Any = None, key: Any = None, partition: int = 0, callback: Any = None,
                on_delivery: Any = None, timestamp: int = 0, headers: Any = None) -> None:  # fmt: skip
        from confluent_kafka import KafkaError, KafkaException

        on_delivery = callback or on_delivery
        if on_delivery is None or topic != "A.t":
            return super().produce(topic, value, key, partition, callback, on_delivery, timestamp, headers)
        if self.in_error and self.state_after:
            raise KafkaException(KafkaError(KafkaError._STATE, "transaction in error"))
        if partition == 1:
            self.in_error = True
            on_delivery(KafkaError(KafkaError.INVALID_RECORD, "Broker failed to validate record"), _report(-1))
        elif self.in_error:
            on_delivery(KafkaError(KafkaError._PURGE_QUEUE, "purged"), _report(-1))
        else:
            super().produce(topic, value, key, partition, callback, on_delivery, timestamp, headers)


@pytest.fixture
def refusing(monkeypatch: pytest.MonkeyPatch) -> list[RefusingProducer]:
    made: list[RefusingProducer] = []

    def transactional_producer(plan: WritePlan, partition: tuple[str, int]) -> RefusingProducer:
        made.append(RefusingProducer(plan.transactional_id(*partition)))
        return made[-1]

    monkeypatch.setattr(clients, "transactional_producer", transactional_producer)
    monkeypatch.setattr(clients, "progress_consumer", lambda plan: FakeConsumer())
    return made


def test_a_refused_batch_is_named_when_the_records_queued_behind_it_were_purged(refusing: list[Any]) -> None:
    sink = _write(_plan(1), [("t", 1), ("t", 0)])  # t[1] refused, then t[0]'s records purged
    results = _finish(sink)
    (producer,) = refusing
    assert ("abort",) in producer.calls and ("commit",) not in producer.calls
    (refused,) = [r for r in results if r.error]
    assert refused.partition == 1 and "offsets 10..12" in refused.error and "INVALID_RECORD" in refused.error


def test_a_refusal_that_fails_the_offsets_call_is_reported_as_the_refusal(
    refusing: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The progress goes to the transaction while the acknowledgements come: a batch refused before it makes
    librdkafka's offsets call fail (the transaction is abortable). The group aborts and its refusal is
    reported, as when the refusal comes with the acknowledgements; nothing is committed."""
    from confluent_kafka import KafkaError, KafkaException

    def send_offsets(self: RefusingProducer, positions: list[Any], _md: Any, _timeout: float) -> None:
        if self.in_error:
            raise KafkaException(KafkaError(KafkaError._STATE, "transaction in error", txn_requires_abort=True))
        FakeProducer.send_offsets_to_transaction(self, positions, _md, _timeout)

    monkeypatch.setattr(RefusingProducer, "send_offsets_to_transaction", send_offsets)
    results = _finish(_write(_plan(1), [("t", 1), ("t", 0)]))
    (producer,) = refusing
    assert [c[0] for c in producer.calls] == ["begin", "abort"]
    (refused,) = [r for r in results if r.error]
    assert refused.partition == 1 and "offsets 10..12" in refused.error and "INVALID_RECORD" in refused.error


def test_an_offsets_call_given_up_on_is_followed_by_no_other_call_on_its_producer(
    refusing: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wait gave up on the offsets call (it may still be running, :mod:`.waits`): even with a refusal
    in sight, the producer is not asked to abort (librdkafka would refuse a second transactional call);
    the task fails, and the next attempt's fence aborts the transaction."""

    def given_up(self: Transactional, *_a: Any) -> None:
        raise WriteError("send_offsets_to_transaction: the target did not answer within 2s", terminal=False)

    monkeypatch.setattr(Transactional, "_send_offsets", given_up)
    sink = _write(_plan(1), [("t", 1), ("t", 0)])
    with pytest.raises(WriteError) as raised:
        _finish(sink)
    assert raised.value.retriable and "did not answer" in str(raised.value)
    (producer,) = refusing
    assert [c[0] for c in producer.calls] == ["begin"], "no abort while the given-up call may still run"


def test_an_offsets_call_that_fails_without_a_refusal_fails_the_task(
    producers: dict[str, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from confluent_kafka import KafkaError, KafkaException

    def send_offsets(self: FakeProducer, *_a: Any) -> None:
        raise KafkaException(KafkaError(KafkaError._STATE, "transaction in error", txn_requires_abort=True))

    monkeypatch.setattr(FakeProducer, "send_offsets_to_transaction", send_offsets)
    sink = _write(_plan(1), [("t", 0)])
    with pytest.raises(KafkaException):
        _finish(sink)
    ((p,),) = producers.values()
    assert [c[0] for c in p.calls] == ["begin"], "neither segments nor a commit after the failed offsets call"


def test_a_record_refused_locally_after_a_refused_batch_stops_the_flow_naming_the_batch(
    refusing: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(RefusingProducer, "state_after", True)
    with pytest.raises(WriteError) as raised:
        _write(_plan(1), [("t", 1), ("t", 0)])
    assert not raised.value.retriable, raised.value
    assert "t[1] offset=10" in str(raised.value) and "exactly-once cannot dead-letter it" in str(raised.value)


def test_at_least_once_a_task_of_many_partitions_deals_them_among_its_producers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One producer per ``sparkmirror.partitions.per.producer`` partitions (at most 32), each partition to one
    for good: its records go through it and are awaited there; segments and progress once for all."""
    made: dict[int, FakeProducer] = {}
    committed: list[tuple[str, int, int]] = []

    class Progress(FakeConsumer):
        def commit(self, offsets: list[Any], asynchronous: bool) -> None:
            committed.extend((tp.topic, tp.partition, tp.offset) for tp in offsets)

    monkeypatch.setattr(clients, "producer", lambda plan, slot=0: made.setdefault(slot, FakeProducer(f"#{slot}")))
    monkeypatch.setattr(clients, "progress_consumer", lambda plan: Progress())
    plan = dataclasses.replace(_plan(0), exactly_once=False, partitions_per_producer=2)
    assert (plan.producers_for(1), plan.producers_for(4), plan.producers_for(5), plan.producers_for(10_000)) == (
        1, 2, 3, 32,
    )  # fmt: skip
    partitions = [("t", p) for p in range(5)]
    sink = Sink(plan, commit.commit_for(plan, len(partitions)))
    sink.open(partitions)
    for round_ in range(2):  # each partition stays with its producer from one write to the next
        for key in partitions:
            sink.write(key, records(*key, range(10 + 3 * round_, 13 + 3 * round_)))
    results = _finish(sink)
    assert sorted(made) == [0, 1, 2]
    assert {slot: sorted(p.ends) for slot, p in made.items()} == {
        0: [("A.t", 0), ("A.t", 3), ("map", 0)],
        1: [("A.t", 1), ("A.t", 4)],
        2: [("A.t", 2)],
    }
    assert all(p.ends[("A.t", q)] == 6 for p in made.values() for (t, q) in p.ends if t == "A.t")
    assert sorted((r.partition, r.records, r.first_target_offset, r.last_target_offset) for r in results) == [
        (q, 6, 0, 5) for q in range(5)
    ]
    # One segment per partition, through the first producer; then the progress of all five at once.
    assert made[0].ends[("map", 0)] == 5 and sorted(committed) == [("A.t", q, 16) for q in range(5)]


def test_at_least_once_idle_producers_rest_and_their_next_record_makes_them_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Between intervals, a producer none of whose partitions had a record for the idle time is closed and
    leaves the worker's client cache, except the first (it writes the segments) and one still holding
    records; a rested partition's next record goes through a new producer of the same slot, and the
    partitions keep their slots. While an interval is unfinished (its reports may be served in another
    thread) nothing rests."""
    made: dict[str, list[FakeProducer]] = {}

    def new_producer(conf: dict[str, str]) -> FakeProducer:
        p = FakeProducer(f"#{len(made)}")
        made.setdefault(conf["client.id"], []).append(p)
        return p

    clock = [1000.0]
    monkeypatch.setattr(sink_module, "time", SimpleNamespace(monotonic=lambda: clock[0], time=time.time))
    monkeypatch.setattr(clients, "_CLIENTS", {})
    monkeypatch.setattr("sparkmirror.kafka.factory.new_producer", new_producer)
    monkeypatch.setattr(clients, "progress_consumer", lambda plan: _CommittingConsumer())
    plan = dataclasses.replace(_plan(0), exactly_once=False, partitions_per_producer=1)
    partitions = [("t", p) for p in range(3)]
    sink = Sink(plan, commit.commit_for(plan, len(partitions)))
    producers = list(sink.commit.producers)  # type: ignore[attr-defined]
    first, second, third = producers
    assert len({id(p) for p in producers}) == 3
    sink.open(partitions)
    assert sink.rest_idle(60.0) == 0  # looked at: idle from now on
    clock[0] += 100
    for key in partitions:
        sink.write(key, records(*key, range(10, 13)))
    assert sink.rest_idle(0.0) == 0  # records written since the last seal: not between intervals
    sealed = sink.seal()
    assert sink.rest_idle(0.0) == 0  # sealed, not finished: its reports may be served meanwhile
    sink.finish(sealed)
    clock[0] += 50
    assert sink.rest_idle(60.0) == 0  # each producer had records 50 s ago
    third.held = 1  # slot 2 still holds a record: it keeps its producer
    clock[0] += 10
    assert sink.rest_idle(60.0) == 1
    assert _closed(second)
    assert not first.closed and not third.closed
    assert sink.parts[("t", 1)].producer is None
    assert second not in clients._CLIENTS.values() and first in clients._CLIENTS.values()
    sink.write(("t", 1), records("t", 1, range(13, 15)))
    results = _finish(sink)
    again = sink.parts[("t", 1)].producer
    assert again is not None and again is not second and again in clients._CLIENTS.values()
    assert again.ends[("A.t", 1)] == 2 and second.ends[("A.t", 1)] == 3
    assert [(r.partition, r.records) for r in results] == [(1, 2)]
    assert ("A.t", 1) not in first.ends and ("A.t", 1) not in third.ends
    clock[0] += 61
    third.held = 0
    assert sink.rest_idle(60.0) == 2  # the new one rests too, once idle: it is served and looked at


class _ProgressOnTarget(FakeConsumer):
    """The target as a woken group's producer looks at it: the progress group (what each transaction
    committed, read back by ``committed``) and the exactly-once layout on record (``None``: the plan's);
    ``events`` says in which order producers were made and the two were read."""

    def __init__(self) -> None:
        self.progress: dict[tuple[str, int], int] = {}
        self.layouts: set[int] | None = None
        self.events: list[str] = []

    def committed(self, tps: list[Any], timeout: float) -> list[Any]:
        self.events.append("progress")
        for tp in tps:
            tp.offset = self.progress.get((tp.topic, tp.partition), -1001)
        return tps


@pytest.fixture
def target(producers: dict[str, list[FakeProducer]], monkeypatch: pytest.MonkeyPatch) -> _ProgressOnTarget:
    """Transactional producers whose commits reach the progress group the task reads."""
    progress = _ProgressOnTarget()
    monkeypatch.setattr(clients, "progress_consumer", lambda plan: progress)
    made = clients.transactional_producer

    def transactional_producer(plan: WritePlan, partition: tuple[str, int]) -> FakeProducer:
        progress.events.append("made")  # clients.transactional_producer: init_transactions, fencing the id
        return made(plan, partition)  # type: ignore[no-any-return]

    def layouts_on_record(plan: WritePlan) -> set[int] | None:
        progress.events.append("layout")
        return {plan.transaction_groups} if progress.layouts is None else progress.layouts

    monkeypatch.setattr(clients, "transactional_producer", transactional_producer)
    monkeypatch.setattr(commit, "_layouts_on_record", layouts_on_record)

    def offsets(self: FakeProducer, positions: list[Any], _md: Any, _timeout: float) -> None:
        self.calls.append(("offsets", sorted((tp.topic, tp.partition, tp.offset) for tp in positions)))
        self.pending = {(tp.topic, tp.partition): tp.offset for tp in positions}

    def commit_transaction(self: FakeProducer, _timeout: float) -> None:
        self.calls.append(("commit",))
        progress.progress.update(self.pending)

    monkeypatch.setattr(FakeProducer, "send_offsets_to_transaction", offsets)
    monkeypatch.setattr(FakeProducer, "commit_transaction", commit_transaction)
    return progress


def _closed(producer: FakeProducer) -> bool:
    deadline = time.monotonic() + 5  # closed in a thread of its own
    while not producer.closed and time.monotonic() < deadline:
        time.sleep(0.01)
    return producer.closed


def test_an_idle_transaction_groups_producer_rests_and_its_next_record_fences_and_checks_the_progress(
    producers: dict[str, list[FakeProducer]], target: _ProgressOnTarget
) -> None:
    """Exactly once, between intervals, an idle group's producer is closed (16 of them were most of an idle
    flow's extra CPU); the group's next record makes it again (``init_transactions``: it fences whoever
    holds the id), reads the group's progress on the target, finds what the task committed, and carries
    on in a new transaction. A group holding a record, or with a transaction open, does not rest."""
    plan = _plan(2)
    partitions = [("t", p) for p in range(4)]
    sink = _write(plan, partitions)
    assert sink.rest_idle(0.0) == 0  # written since the last seal: a transaction is open
    _finish(sink)
    (a,), (b,) = (producers[tid] for tid in sorted(producers))
    b.held = 1
    assert sink.rest_idle(0.0) == 1  # the group holding a record keeps its producer
    assert _closed(a) and not b.closed
    mine = [k for k in partitions if plan.transactional_id(*k) == a.tid]
    assert all(sink.parts[k].producer is None for k in mine)
    target.events.clear()
    sink.write(mine[0], records(*mine[0], range(13, 15)))
    again = producers[a.tid][-1]
    # Made again (fencing the id), and only then the layout on record and the group's progress looked at.
    assert again is not a and target.events == ["made", "layout", "progress"]
    results = _finish(sink)
    assert [(r.partition, r.records) for r in results] == [(mine[0][1], 2)]
    assert [c[0] for c in again.calls] == ["begin", "offsets", "segment", "commit"]
    assert target.progress[("A.t", mine[0][1])] == 15
    b.held = 0
    assert sink.rest_idle(0.0) == 2


def test_a_rested_group_whose_progress_moved_meanwhile_fails_the_task_before_it_writes(
    producers: dict[str, list[FakeProducer]], target: _ProgressOnTarget
) -> None:
    """Another attempt committed the group while this task's producer rested: this task's floors are stale,
    so the producer made again (which fenced that attempt) writes nothing and the task fails, to be retried
    from the progress on the target."""
    plan = _plan(1)
    sink = _write(plan, [("t", 0), ("t", 1)])
    _finish(sink)
    assert sink.rest_idle(0.0) == 1
    target.progress[("A.t", 1)] = 20  # another attempt's commit
    with pytest.raises(WriteError, match=r"A.t\[1\]: its progress on the target is 20, this task last knew 13"):
        sink.write(("t", 0), records("t", 0, range(13, 15)))
    again = producers[plan.transactional_id("t", 0)][-1]
    assert again.calls == [] and not again.ends


class _CommittingConsumer(FakeConsumer):
    def commit(self, offsets: list[Any], asynchronous: bool) -> None:
        pass


@pytest.mark.parametrize("answers", [True, False], ids=["answered", "timed-out"])
def test_the_probes_consumer_is_made_for_each_probe_and_closed_whatever_it_answered(
    monkeypatch: pytest.MonkeyPatch, answers: bool
) -> None:
    from confluent_kafka import KafkaError, KafkaException

    from sparkmirror.kafka import factory

    made: list[Any] = []

    class Probe(FakeConsumer):
        def __init__(self, conf: dict[str, str]) -> None:
            self.conf = conf
            self.closed = threading.Event()
            made.append(self)

        def committed(self, tps: list[Any], timeout: float) -> list[Any]:
            if not answers:
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "no coordinator"))
            return super().committed(tps, timeout)

        def close(self) -> None:
            self.closed.set()

    monkeypatch.setattr(factory, "new_consumer", Probe)
    plan = _plan(1)
    for _ in range(2):
        if answers:
            got = clients.fresh_progress_committed(plan, [("A.t", 0)], 1.0)
            assert [(tp.topic, tp.partition) for tp in got] == [("A.t", 0)]
        else:
            with pytest.raises(KafkaException):
                clients.fresh_progress_committed(plan, [("A.t", 0)], 1.0)
    assert len(made) == 2 and made[0] is not made[1]  # one per probe: none is the task's cached consumer
    assert all(p.closed.wait(5) for p in made)
    assert made[0].conf == plan.progress_consumer_config()


def test_a_rested_group_of_an_earlier_layout_fails_the_task_before_it_writes(
    producers: dict[str, list[FakeProducer]], target: _ProgressOnTarget
) -> None:
    """A later start of the flow recorded another layout and fenced this one's ids: this task's producer,
    made again, has just undone that fence while the partitions are written under other ids; the task
    stops before it writes, although the group's progress did not move (the other writer had nothing yet)."""
    plan = _plan(1)
    sink = _write(plan, [("t", 0), ("t", 1)])
    _finish(sink)
    assert sink.rest_idle(0.0) == 1
    target.layouts = {4}
    with pytest.raises(WriteError, match="layout on the target is 4 groups, this task writes with 1 groups"):
        sink.write(("t", 0), records("t", 0, range(13, 15)))
    assert producers[plan.transactional_id("t", 0)][-1].calls == []


def test_an_idle_partitions_expired_progress_is_not_another_attempts_commit(
    producers: dict[str, list[FakeProducer]], target: _ProgressOnTarget
) -> None:
    """The progress group never has members, so an idle partition's progress expires
    (``offsets.retention.minutes``): none on record is not a commit of another attempt, and the group's
    next record is written."""
    plan = _plan(1)
    sink = _write(plan, [("t", 0), ("t", 1)])
    _finish(sink)
    assert sink.rest_idle(0.0) == 1
    del target.progress[("A.t", 1)]
    sink.write(("t", 0), records("t", 0, range(13, 15)))
    assert [(r.partition, r.records) for r in _finish(sink)] == [(0, 2)]
    assert target.progress[("A.t", 0)] == 15


def test_the_layout_on_record_is_read_from_the_drivers_record_by_a_consumer_made_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The driver's fence records the layouts as commit metadata of the flow's transactions group on the
    offset-map topic's partition 0; a woken producer's task reads that record (no record: ``None``) with a
    consumer made and closed for the look, and an error it answers fails the task."""
    from confluent_kafka import KafkaError

    from sparkmirror.core.naming import transactions_group
    from sparkmirror.core.transactions import format_layouts

    plan = _plan(4)
    answers: list[Any] = []
    asked: list[tuple[str, list[tuple[str, int]]]] = []

    def fresh_committed(_plan: WritePlan, group: str, parts: list[tuple[str, int]], timeout_s: float) -> list[Any]:
        asked.append((group, parts))
        return [answers.pop(0)]

    monkeypatch.setattr(clients, "fresh_committed", fresh_committed)
    answers.append(TopicPartition("map", 0, 0, metadata=format_layouts({4})))
    assert commit._layouts_on_record(plan) == {4}
    assert asked == [(transactions_group("A", "B"), [("map", 0)])]
    answers.append(TopicPartition("map", 0, -1001))
    assert commit._layouts_on_record(plan) is None
    # librdkafka's answer for a partition it could not read (TopicPartition.error is read-only in Python).
    refused = KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED)
    answers.append(SimpleNamespace(offset=-1001, metadata=None, error=refused))
    with pytest.raises(WriteError, match="cannot read the exactly-once layout on record"):
        commit._layouts_on_record(plan)
