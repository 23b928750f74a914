"""The streaming task's read loop, with a stand-in consumer and sink (no Kafka)."""

from __future__ import annotations

import dataclasses
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from confluent_kafka import KafkaError, TopicPartition

from source_messages import SourceMessage
from sparkmirror.core.policy import DefaultReplicationPolicy
from sparkmirror.core.ranges import OPEN_END, SourceRange
from sparkmirror.pipeline.exceptions import WriteError
from sparkmirror.pipeline.executor import stream
from sparkmirror.pipeline.executor.plan import Record, WritePlan
from sparkmirror.pipeline.executor.results import PartitionResult
from sparkmirror.pipeline.executor.stream import StreamTask
from sparkmirror.pipeline.reports import Answer


def Msg(t: str, p: int, o: int, eof: bool = False) -> SourceMessage:  # noqa: N802 - reads as the record it builds
    """A record of ``t[p]`` at offset ``o`` (3 bytes of key and value), or (``eof``) the partition's end there."""
    return SourceMessage(t, p, o, v=b"v%d" % o, ts=1000 + o, err=KafkaError(KafkaError._PARTITION_EOF) if eof else None)


class Consumer:
    def __init__(self, msgs: list[SourceMessage]) -> None:
        self.msgs = msgs
        self.unassigned: list[list[tuple[str, int]]] = []
        self.calls: list[tuple[str, list[tuple[object, ...]]]] = []
        self.ends: dict[tuple[str, int], int] = {}

    def poll(self, _timeout: float) -> SourceMessage | None:
        return self.msgs.pop(0) if self.msgs else None

    def consume(self, n: int, _timeout: float) -> list[SourceMessage]:
        out, self.msgs = self.msgs[:n], self.msgs[n:]
        return out

    def incremental_unassign(self, tps: list[object]) -> None:
        self.unassigned.append([(tp.topic, tp.partition) for tp in tps])  # type: ignore[attr-defined]

    def pause(self, tps: list[object]) -> None:
        self.calls.append(("pause", [(tp.topic, tp.partition) for tp in tps]))  # type: ignore[attr-defined]

    def resume(self, tps: list[object]) -> None:
        self.calls.append(("resume", [(tp.topic, tp.partition) for tp in tps]))  # type: ignore[attr-defined]

    def seek(self, tp: object) -> None:
        self.calls.append(("seek", [(tp.topic, tp.partition, tp.offset)]))  # type: ignore[attr-defined]

    def position(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        self.calls.append(("position", [(tp.topic, tp.partition) for tp in tps]))
        return [TopicPartition(tp.topic, tp.partition, 50) for tp in tps]

    def get_watermark_offsets(self, tp: TopicPartition, cached: bool = False) -> tuple[int, int]:
        return 0, self.ends.get((tp.topic, tp.partition), 60)


class Sink:
    def __init__(self) -> None:
        self.written: dict[tuple[str, int], list[int]] = {}
        self.held = 0

    def write(self, key: tuple[str, int], records: list[Record]) -> int:
        self.written.setdefault(key, []).extend(r[0] for r in records)
        return sum(len(r[1] or b"") + len(r[2] or b"") for r in records)


PLAN = WritePlan(flow="A->B", source_alias="A", policy=DefaultReplicationPolicy(), producer_config={})


def test_a_partitions_last_record_and_its_end_in_one_read_unassign_it_once() -> None:
    task = StreamTask(PLAN, 0, [SourceRange("t", 0, 0, 3), SourceRange("t", 1, 0, 10)])
    task.next = {("t", 0): 0, ("t", 1): 0}
    consumer = Consumer([Msg("t", 0, 0), Msg("t", 0, 1), Msg("t", 0, 2), Msg("t", 0, 3, eof=True), Msg("t", 1, 0)])
    sink = Sink()
    # five messages taken, four of them records (3 bytes of key and value each)
    assert task._read(consumer, sink, 0.1, 100) == (5, 4, 12)  # type: ignore[arg-type]
    assert consumer.unassigned == [[("t", 0)]]
    assert task.done == {("t", 0)}
    assert sink.written == {("t", 0): [0, 1, 2], ("t", 1): [0]}


def test_records_past_a_ranges_end_or_already_copied_are_not_written() -> None:
    task = StreamTask(PLAN, 0, [SourceRange("t", 0, 5, 8)])
    task.next = {("t", 0): 6}
    consumer = Consumer([Msg("t", 0, 5), Msg("t", 0, 6), Msg("t", 0, 9)])
    sink = Sink()
    task._read(consumer, sink, 0.1, 100)  # type: ignore[arg-type]
    assert sink.written == {("t", 0): [6]}
    assert task.done == {("t", 0)} and consumer.unassigned == [[("t", 0)]]


def test_a_paused_topics_partitions_are_paused_and_resumed_where_the_task_stands() -> None:
    task = StreamTask(PLAN, 0, [SourceRange("t", 0, 0, 100), SourceRange("t", 1, 0, 100), SourceRange("u", 0, 0, 9)])
    task.next = {("t", 0): 5, ("t", 1): 7, ("u", 0): 0}
    consumer = Consumer([])
    task._follow(consumer, Answer(rate=1000.0, paused=("t",)))  # type: ignore[arg-type]
    assert consumer.calls == [("pause", [("t", 0), ("t", 1)])]
    assert task.budget.rate == 1000.0
    # a record of a paused partition fetched before the pause is not taken: read again on resume
    consumer.msgs = [Msg("t", 0, 5), Msg("u", 0, 0)]
    sink = Sink()
    task._read(consumer, sink, 0.1, 100)  # type: ignore[arg-type]
    assert sink.written == {("u", 0): [0]} and task.next[("t", 0)] == 5
    consumer.calls.clear()
    task._follow(consumer, Answer())  # type: ignore[arg-type]
    assert consumer.calls == [("resume", [("t", 0), ("t", 1)]), ("seek", [("t", 0, 5)]), ("seek", [("t", 1, 7)])]
    assert task.budget.rate is None and task.paused == set()


def test_an_idle_partitions_positions_are_reported_once_then_only_when_the_consumer_hands_something() -> None:
    """The first report has every partition's positions; later ones only those the consumer handed a
    record or an event of (an idle task of 500 partitions does not ask for 500 positions a second),
    except every ``_ALL_POSITIONS_S`` and in the last report, and of those only what changed since the
    driver was told (it keeps the rest)."""
    task = StreamTask(PLAN, 0, [SourceRange("t", p, 0, 100) for p in range(3)])
    task.next = {("t", 0): 10, ("t", 1): 20, ("t", 2): 30}
    consumer = Consumer([])
    first = task._positions(consumer)  # type: ignore[arg-type]
    assert first == [("t", 0, 10, 60, 50), ("t", 1, 20, 60, 50), ("t", 2, 30, 60, 50)]
    assert task._positions(consumer) == []  # type: ignore[arg-type]
    consumer.msgs = [Msg("t", 1, 20), Msg("t", 2, 30, eof=True)]
    task._read(consumer, Sink(), 0.1, 100)  # type: ignore[arg-type]
    # the end event of t[2] changed nothing the driver holds (the fake's position is always 50)
    assert task._positions(consumer) == [("t", 1, 21, 60, 50)]  # type: ignore[arg-type]
    assert task._positions(consumer) == []  # type: ignore[arg-type]
    # paused, then resumed: their positions change meaning (a paused partition reports its next offset)
    task._follow(consumer, Answer(paused=("t",)))  # type: ignore[arg-type]
    assert [p[:3] for p in task._positions(consumer)] == [("t", 0, 10), ("t", 1, 21), ("t", 2, 30)]  # type: ignore[arg-type]
    assert task._positions(consumer, every=True) == []  # type: ignore[arg-type]
    task._follow(consumer, Answer())  # type: ignore[arg-type]
    task.next[("t", 2)] = 31  # looked at with every partition, only what changed is sent
    consumer.calls.clear()
    assert [p[:3] for p in task._positions(consumer, every=True)] == [("t", 0, 10), ("t", 1, 21), ("t", 2, 31)]  # type: ignore[arg-type]
    assert ("position", [("t", 0), ("t", 1), ("t", 2)]) in consumer.calls
    assert task._positions(consumer, every=True) == []  # type: ignore[arg-type]
    task._follow(consumer, Answer(paused=("t",)))  # type: ignore[arg-type]
    task._positions(consumer)  # type: ignore[arg-type]
    # an end the consumer learnt without handing anything (records held in its queue, an open transaction)
    consumer.ends[("t", 0)] = 70
    assert task._positions(consumer) == [("t", 0, 10, 70, 10)]  # type: ignore[arg-type]


def test_an_unthrottled_task_looks_at_the_ends_of_the_partitions_it_touched_only() -> None:
    """Each second's report looks at the ends of the partitions the consumer handed something of; the
    others' ends are looked at with every partition's positions (``every``), and each second while a
    limit may hold the task back (``ends``: its consumer learns ends it hands no record of)."""
    task = StreamTask(PLAN, 0, [SourceRange("t", p, 0, 100) for p in range(3)])
    task.next = {("t", 0): 10, ("t", 1): 20, ("t", 2): 30}
    consumer = Consumer([])
    task._positions(consumer)  # type: ignore[arg-type]
    consumer.ends[("t", 0)] = 70  # an open source transaction's records: nothing handed
    consumer.msgs = [Msg("t", 1, 20)]
    consumer.ends[("t", 1)] = 65
    task._read(consumer, Sink(), 0.1, 100)  # type: ignore[arg-type]
    assert task._positions(consumer, ends=False) == [("t", 1, 21, 65, 50)]  # type: ignore[arg-type]
    assert task._positions(consumer, ends=False) == []  # type: ignore[arg-type]
    assert task._positions(consumer, ends=True) == [("t", 0, 10, 70, 50)]  # type: ignore[arg-type]
    consumer.ends[("t", 2)] = 90
    assert [p[:4] for p in task._positions(consumer, every=True, ends=True)] == [("t", 2, 30, 90)]  # type: ignore[arg-type]


def test_a_task_fails_at_the_answer_that_says_one_of_its_topics_was_recreated() -> None:
    """The driver checks the source topic ids while the tasks run; an answer naming a topic of this task's
    fails it before it reads more (naming the topic and both ids); another task's topic does not."""
    task = StreamTask(PLAN, 0, [SourceRange("t", 0, 0, 100), SourceRange("u", 0, 0, 100)])
    task.next = {("t", 0): 5, ("u", 0): 0}
    consumer = Consumer([])
    task._follow(consumer, Answer(recreated=(("other", "id-1", "id-2"),)))  # type: ignore[arg-type]
    with pytest.raises(WriteError) as raised:
        task._follow(consumer, Answer(recreated=(("other", "id-1", "id-2"), ("u", "id-3", "id-4"))))  # type: ignore[arg-type]
    text = str(raised.value)
    assert "source topic u was deleted and re-created" in text and "id-3" in text and "id-4" in text
    assert "other" not in text and raised.value.retriable


class Sealed:
    def __init__(self, key: tuple[str, int]) -> None:
        self.topic, self.partition = key


class BlockedSink(Sink):
    """A sink whose first interval does not finish until the test lets it (a slow or absent target)."""

    def __init__(self) -> None:
        super().__init__()
        self.release_finish = threading.Event()

    def serve(self) -> None:
        pass

    def unserved(self) -> bool:
        return False

    def seal(self) -> list[Sealed]:
        sealed, self.written = [Sealed(k) for k in self.written], {}
        return sealed

    def finish(self, _sealed: list[Sealed]) -> list[object]:
        self.release_finish.wait(10)
        return []

    def release(self) -> None:
        pass

    def rest_idle(self, _idle_s: float) -> int:
        return 0


class Channel:
    def __init__(self) -> None:
        self.answers = 0
        self.answer = Answer()
        self.stop_requested = False
        self.reports: list[object] = []

    def post(self, report: object) -> bool:
        self.reports.append(report)
        return True

    def send(self, report: object) -> None:
        self.reports.append(report)

    def close(self) -> None:
        pass


def test_a_task_held_back_by_an_interval_still_finishing_reports_the_ends_its_consumer_learnt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A full interval waits for the one before it to finish (a slow target): the task reads nothing
    meanwhile, but its consumer fetches ahead and learns ends it hands no record of. Each second's report
    has those ends (the flow's lag, and what a deleted topic's judge compares with), not only every 10 s."""
    monkeypatch.setattr(stream, "_HEARTBEAT_S", 0.2)
    monkeypatch.setattr(stream, "_IDLE_WAIT_S", 0.1)
    plan = dataclasses.replace(PLAN, interval_max_records=2, commit_interval_ms=60_000)  # an interval of 1 record
    task = StreamTask(plan, 0, [SourceRange("t", 0, 0, 100), SourceRange("t", 1, 0, 100)])
    task.next = {("t", 0): 10, ("t", 1): 20}
    consumer = Consumer([Msg("t", 0, 10), Msg("t", 0, 11)])
    sink, channel = BlockedSink(), Channel()
    finisher = ThreadPoolExecutor(max_workers=1)
    copy = threading.Thread(target=task._copy, args=(sink, consumer, channel, 0, finisher))
    copy.start()
    try:
        deadline = time.monotonic() + 5
        while len(channel.reports) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)  # the first report (every partition's), then one while the interval finishes
        consumer.ends[("t", 1)] = 95  # fetched ahead, nothing handed: the task does not read
        seen = len(channel.reports)
        while len(channel.reports) < seen + 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        channel.stop_requested = True
        sink.release_finish.set()
        copy.join(10)
        finisher.shutdown()
    assert not copy.is_alive()
    beats = [r for r in channel.reports[seen:] if not r.final]  # type: ignore[attr-defined]
    assert ("t", 1, 20, 95, 50) in [pos for r in beats for pos in r.positions]  # not the last report's


class Forgetful(Consumer):
    """A consumer whose topic was deleted: it no longer knows its ends."""

    def get_watermark_offsets(self, tp: TopicPartition, cached: bool = False) -> tuple[int, int]:
        raise RuntimeError("unknown partition")


def test_the_end_a_read_came_with_is_noted_at_the_read_and_kept_once_the_consumer_forgets_it() -> None:
    """A source topic deleted right after its last record is deleted on the target only if the copy saw its
    end: noted as the records are read (not at the interval's seal, nor at the next report, by which time the
    consumer may have forgotten the topic), and only for partitions read past the end noted before."""
    task = StreamTask(PLAN, 0, [SourceRange("t", 0, 0, 100), SourceRange("t", 1, 0, 100)])
    task.next = {("t", 0): 0, ("t", 1): 0}
    consumer = Consumer([Msg("t", 0, 0), Msg("t", 0, 1), Msg("t", 0, 2)])
    consumer.ends[("t", 0)] = 3
    looked: list[tuple[str, int]] = []
    plain = consumer.get_watermark_offsets

    def watched(tp: TopicPartition, cached: bool = False) -> tuple[int, int]:
        looked.append((tp.topic, tp.partition))
        return plain(tp, cached)

    consumer.get_watermark_offsets = watched  # type: ignore[method-assign]
    task._read(consumer, Sink(), 0.1, 100)  # type: ignore[arg-type]
    assert task._ends == {("t", 0): 3} and looked == [("t", 0)]
    # the last record read again (after a seek back) is not past the end noted: no look
    task.next[("t", 0)] = 2
    consumer.msgs = [Msg("t", 0, 2)]
    looked.clear()
    task._read(consumer, Sink(), 0.1, 100)  # type: ignore[arg-type]
    assert looked == []
    gone = Forgetful([])
    # the next report (of the partitions touched) carries it, the consumer having forgotten the topic meanwhile
    assert [p for p in task._positions(gone) if p[1] == 0] == [("t", 0, 3, 3, 50)]  # type: ignore[arg-type]


@pytest.mark.parametrize("until", [OPEN_END, 9], ids=["streaming", "once"])
def test_only_a_task_with_an_end_to_reach_asks_its_consumer_for_the_ends_it_reaches(
    monkeypatch: pytest.MonkeyPatch, until: int
) -> None:
    """Streaming, no range ends: at many partitions of a few records a second nearly every read would
    reach a partition's end, an event a record for nothing. ``--once`` needs them (an end past its last
    record, behind transaction markers)."""
    asked: list[bool] = []

    class Opened(Sink):
        def open(self, keys: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
            return dict.fromkeys(keys, -1)

        def abandon(self) -> None:
            pass

    def source_consumer(_plan: WritePlan, *, partition_eof: bool) -> None:
        asked.append(partition_eof)
        raise RuntimeError("stop here")

    monkeypatch.setattr(stream, "Sink", lambda _plan, _commit: Opened())
    monkeypatch.setattr(stream, "commit_for", lambda _plan, _n: None)
    monkeypatch.setattr(stream, "ReportClient", lambda _address, _token: Channel())
    monkeypatch.setattr(stream.clients, "source_consumer", source_consumer)
    task = StreamTask(PLAN, 0, [SourceRange("t", 0, 0, OPEN_END), SourceRange("t", 1, 5, until)])
    with pytest.raises(RuntimeError, match="stop here"):
        task.run()
    assert asked == [until != OPEN_END] == [task.has_ends]
    assert PLAN.reader_config(partition_eof=False)["enable.partition.eof"] == "false"
    assert PLAN.reader_config(partition_eof=True)["enable.partition.eof"] == "true"


class _Recording:
    """A producer that keeps the values it was handed; it acknowledges nothing (the commit is a stand-in)."""

    def __init__(self) -> None:
        self.values: list[bytes] = []

    def produce(self, _topic: str, value: bytes, *_rest: object) -> None:
        self.values.append(value)

    def poll(self, _timeout: float = 0) -> int:
        return 0

    def __len__(self) -> int:
        return 0


class _SlowGroup:
    """Exactly once's shape, a group (and producer) per partition of ``t``: group g0's finish waits until
    the test lets it, g1's ends at once."""

    def __init__(self) -> None:
        self.serving = threading.Lock()
        self.producers = {"g0": _Recording(), "g1": _Recording()}
        self.g0_may_finish = threading.Event()
        self.finished: list[tuple[str, int]] = []

    def group_of(self, key: tuple[str, int]) -> str:
        return f"g{key[1]}"

    def producer_for(self, key: tuple[str, int]) -> _Recording:
        return self.producers[self.group_of(key)]

    def open(self, _parts: object) -> None:
        pass

    def begin(self, w: object) -> None:
        w.begun = True  # type: ignore[attr-defined]

    def finish(self, parts: list[object]) -> None:
        group = self.group_of((parts[0].topic, parts[0].partition))  # type: ignore[attr-defined]
        if group == "g0":
            self.g0_may_finish.wait(10)
        self.finished += [(group, w.last_offset) for w in parts]  # type: ignore[attr-defined]

    def abandon(self, _parts: object) -> None:
        pass

    def rest(self, _producer: object) -> bool:
        return False


def _two_groups(commit: _SlowGroup) -> tuple[Any, Consumer, Channel, ThreadPoolExecutor, threading.Thread]:
    """An exactly-once task of ``t[0]`` and ``t[1]`` over a real sink and ``commit``, each partition's first
    record waiting to be read; its loop in a thread, not started."""
    from sparkmirror.pipeline.executor.sink import Sink as RealSink

    plan = dataclasses.replace(PLAN, exactly_once=True, commit_interval_ms=30)
    sink = RealSink(plan, commit)  # type: ignore[arg-type]
    task = StreamTask(plan, 0, [SourceRange("t", 0, 0, 100), SourceRange("t", 1, 0, 100)])
    task.next = {("t", 0): 0, ("t", 1): 0}
    consumer, channel = Consumer([Msg("t", 0, 0), Msg("t", 1, 0)]), Channel()
    finisher = ThreadPoolExecutor(max_workers=2)
    copy = threading.Thread(target=task._copy, args=(sink, consumer, channel, 0, finisher))
    return sink, consumer, channel, finisher, copy


def _wait_until(what: object, timeout_s: float = 5) -> None:
    deadline = time.monotonic() + timeout_s
    while not what() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.01)


def test_exactly_once_a_group_still_finishing_holds_back_its_own_partitions_only() -> None:
    """Exactly once, each transaction group's interval is finished beside the reads: while one group's
    commit waits (a slow target), the task goes on reading, the other group's records are written and
    committed, and the waiting group's are written once its commit has ended, in order."""
    commit = _SlowGroup()
    p0, p1 = commit.producers["g0"], commit.producers["g1"]
    sink, consumer, channel, finisher, copy = _two_groups(commit)

    copy.start()
    try:
        _wait_until(lambda: ("g1", 0) in commit.finished)  # both sealed; g1's done, g0's waits
        consumer.msgs += [Msg("t", 0, 1), Msg("t", 1, 1)]
        _wait_until(lambda: ("g1", 1) in commit.finished)
        assert p1.values == [b"v0", b"v1"] and ("g1", 1) in commit.finished  # the other group goes on
        assert p0.values == [b"v0"] and sink.held == 1  # the waiting group's record is held
        commit.g0_may_finish.set()
        _wait_until(lambda: ("g0", 1) in commit.finished)
        assert p0.values == [b"v0", b"v1"]
    finally:
        commit.g0_may_finish.set()
        channel.stop_requested = True
        copy.join(10)
        finisher.shutdown()
    assert not copy.is_alive()
    assert [f for f in commit.finished if f[0] == "g0"] == [("g0", 0), ("g0", 1)]  # one at a time, in order
    assert channel.reports[-1].final  # type: ignore[attr-defined]


class _RefusingGroup(_SlowGroup):
    """g1's interval is refused by the target (its transaction aborted) once the test lets it finish; g0's
    finish waits for the test too."""

    def __init__(self) -> None:
        super().__init__()
        self.abandoned = False
        self.g1_may_finish = threading.Event()

    def finish(self, parts: list[object]) -> None:
        group = self.group_of((parts[0].topic, parts[0].partition))  # type: ignore[attr-defined]
        if group == "g1":
            self.g1_may_finish.wait(10)
            parts[0].refusal = "MSG_SIZE_TOO_LARGE"  # type: ignore[attr-defined]
        super().finish(parts)

    def abandon(self, _parts: object) -> None:
        self.abandoned = True


def test_exactly_once_a_refused_group_ends_the_task_once_the_other_groups_have_finished() -> None:
    """A refusal stops the flow: the task reports it at once, seals nothing more, waits for the groups
    still finishing and ends aborting what is open. What another group read while it finished stays
    held: nothing read after the refusal is written."""
    commit = _RefusingGroup()
    sink, consumer, channel, finisher, copy = _two_groups(commit)

    def refusals() -> list[tuple[int, str | None]]:
        rows = [PartitionResult.from_row(row) for r in channel.reports for row in r.results]  # type: ignore[attr-defined]
        return [(r.partition, r.error) for r in rows if r.error]

    copy.start()
    try:
        _wait_until(lambda: commit.producers["g0"].values and commit.producers["g1"].values)
        time.sleep(0.1)  # both groups sealed and finishing
        consumer.msgs += [Msg("t", 0, 1)]
        _wait_until(lambda: sink.held == 1)  # g0 finishing: its record held
        commit.g1_may_finish.set()
        _wait_until(lambda: bool(refusals()))
        assert refusals() == [(1, "MSG_SIZE_TOO_LARGE")] and copy.is_alive()  # reported; g0 still finishing
        commit.g0_may_finish.set()
        copy.join(10)
    finally:
        commit.g0_may_finish.set()
        commit.g1_may_finish.set()
        finisher.shutdown()
    assert not copy.is_alive() and channel.reports[-1].final and commit.abandoned  # type: ignore[attr-defined]
    assert commit.producers["g0"].values == [b"v0"]  # its record read before the refusal was never written
    assert commit.finished == [("g1", 0), ("g0", 0)]  # nothing sealed after the refusal
