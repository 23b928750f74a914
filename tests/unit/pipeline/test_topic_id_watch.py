"""The driver's look for source topics deleted and re-created while the copy runs: one look for the flow
every few seconds, read once answered and never waited for; the tasks learn it from their next answer."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from sparkmirror.pipeline.driver import flow as flow_module
from sparkmirror.pipeline.driver import stream as stream_module
from sparkmirror.pipeline.driver.flow import Flow
from sparkmirror.pipeline.reports import Answer, Report


class Job:
    def __init__(self, ids: dict[str, str], paused: tuple[str, ...] = ()) -> None:
        self.plan = SimpleNamespace(topic_ids=ids)
        self.recreated: tuple[tuple[str, str, str], ...] = ()
        self.moved: set[str] = set()
        self.throttle = SimpleNamespace(paused_topics=paused)

    def take_moved(self) -> set[str]:
        moved, self.moved = self.moved, set()
        return moved

    def topics_recreated(self, changed: list[tuple[str, str, str]]) -> None:
        stream_module.StreamingCopy.topics_recreated(self, changed)  # type: ignore[arg-type]


class Look:
    """A look the test answers: ``ids`` once ``answered`` (a topic it does not name failed, unless ``gone``:
    the source said it does not know it)."""

    made: list[Look] = []

    def __init__(self, admin: object, topics: Any, *, timeout_s: float) -> None:
        self.topics = sorted(topics)
        self.answered = False
        self.current: dict[str, str] = {}
        self.gone: set[str] = set()
        Look.made.append(self)

    def done(self) -> bool:
        return self.answered

    def ids(self) -> tuple[dict[str, str], dict[str, str]]:
        return self.current, {t: "timed out" for t in self.topics if t not in self.current and t not in self.gone}


@pytest.fixture
def flow(monkeypatch: pytest.MonkeyPatch) -> Any:
    Look.made = []
    clock = [100.0]
    monkeypatch.setattr(flow_module, "TopicIdLook", Look)
    monkeypatch.setattr(flow_module, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    me = SimpleNamespace(
        copy_job=None,
        clients=SimpleNamespace(source_admin=object()),
        flow=SimpleNamespace(name="A->B"),
        _ids_look=None,
        _ids_next=0.0,
        _ids_all_next=0.0,
        _ids_unseen=set(),
        clock=clock,
    )
    me.watch = lambda: Flow._watch_topic_ids(me)  # type: ignore[arg-type]
    return me


def test_a_topic_with_another_id_is_told_to_the_job_once_answered(flow: Any) -> None:
    job = flow.copy_job = Job({"a": "id-a", "b": "id-b", "c": "id-c"})
    flow.watch()
    assert [look.topics for look in Look.made] == [["a", "b", "c"]]
    flow.clock[0] += 1
    flow.watch()  # not answered yet: not waited for, and no second look
    assert len(Look.made) == 1 and job.recreated == ()
    # "c" is gone (deleted, not re-created): the topic refresh's to handle, not this look's.
    Look.made[0].current, Look.made[0].answered = {"a": "id-a", "b": "id-b2"}, True
    flow.clock[0] += 1
    flow.watch()
    assert job.recreated == (("b", "id-b", "id-b2"),)
    flow.clock[0] += 10
    flow.watch()
    assert len(Look.made) == 1  # told: the job's tasks fail on it, no more looks


def _answer_last(flow: Any, current: dict[str, str]) -> None:
    """The last look is answered with ``current`` and read at the next turn."""
    Look.made[-1].current, Look.made[-1].answered = current, True
    flow.clock[0] += 1
    flow.watch()


def test_the_same_ids_are_looked_at_again_every_interval(flow: Any) -> None:
    job = flow.copy_job = Job({"a": "id-a"})
    flow.watch()
    Look.made[0].current, Look.made[0].answered = {"a": "id-a"}, True
    for _ in range(4):  # answered: read at the next turn; the next look when the interval is up
        flow.clock[0] += 1
        flow.watch()
    assert len(Look.made) == 1
    job.moved = {"a"}
    flow.clock[0] += flow_module.TOPIC_IDS_EVERY_S
    flow.watch()
    assert len(Look.made) == 2 and job.recreated == ()


def test_between_full_looks_only_the_topics_read_since_and_the_paused_ones_are_looked_at(flow: Any) -> None:
    """A record of a re-created topic reaches the target only through a read, which the tasks report:
    an idle topic is not described every few seconds (its cost at 1,000 partitions), but every minute."""
    ids = {"a": "id-a", "b": "id-b", "c": "id-c", "p": "id-p"}
    job = flow.copy_job = Job(ids, paused=("p",))
    flow.watch()
    assert Look.made[-1].topics == ["a", "b", "c", "p"]  # the first look: every topic
    _answer_last(flow, ids)
    job.moved = {"b", "gone-from-the-flow"}
    flow.clock[0] += flow_module.TOPIC_IDS_EVERY_S
    flow.watch()
    assert Look.made[-1].topics == ["b", "p"]
    _answer_last(flow, {"b": "id-b", "p": "id-p2"})  # a paused topic re-created: found before any resume
    assert job.recreated == (("p", "id-p", "id-p2"),)


def test_an_idle_flow_makes_no_look_until_every_topic_is_due(flow: Any) -> None:
    flow.copy_job = Job({"a": "id-a", "b": "id-b"})
    flow.watch()
    _answer_last(flow, {"a": "id-a", "b": "id-b"})
    turns = int(flow_module.TOPIC_IDS_ALL_EVERY_S) - 2
    for _ in range(turns):  # nothing read, nothing paused
        flow.clock[0] += 1
        flow.watch()
    assert len(Look.made) == 1
    flow.clock[0] += flow_module.TOPIC_IDS_EVERY_S
    flow.watch()
    assert len(Look.made) == 2 and Look.made[-1].topics == ["a", "b"]


def test_a_topic_a_look_did_not_see_is_in_the_next_one(flow: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    job = flow.copy_job = Job({"a": "id-a", "b": "id-b"})
    flow.watch()
    _answer_last(flow, {"a": "id-a"})  # "b" not answered
    flow.clock[0] += flow_module.TOPIC_IDS_EVERY_S
    flow.watch()
    assert Look.made[-1].topics == ["b"]
    _answer_last(flow, {"b": "id-b"})

    def refused(*_a: Any, **_k: Any) -> None:
        raise RuntimeError("source unreachable")

    job.moved = {"a"}
    monkeypatch.setattr(flow_module, "TopicIdLook", refused)
    flow.clock[0] += flow_module.TOPIC_IDS_EVERY_S
    flow.watch()  # not asked: "a" waits for the next look
    monkeypatch.setattr(flow_module, "TopicIdLook", Look)
    flow.clock[0] += flow_module.TOPIC_IDS_EVERY_S
    flow.watch()
    assert Look.made[-1].topics == ["a"]


def test_a_look_that_cannot_be_asked_is_said_and_asked_again_later(
    flow: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refused(*_a: Any, **_k: Any) -> None:
        raise RuntimeError("source unreachable")

    monkeypatch.setattr(flow_module, "TopicIdLook", refused)
    flow.copy_job = Job({"a": "id-a"})
    flow.watch()
    assert "source topic ids not looked at this turn: source unreachable" in caplog.text
    assert flow._ids_look is None and flow._ids_next == 100.0 + flow_module.TOPIC_IDS_EVERY_S


def test_every_answer_of_the_job_names_the_recreated_topics() -> None:
    """``StreamingCopy``: once the driver found a re-created topic, each report's answer carries it."""
    copy = SimpleNamespace(
        _lock=threading.Lock(),
        reported=set(),
        positions={},
        lag=0,
        _error=None,
        recorder=SimpleNamespace(metrics=None),
        throttle=SimpleNamespace(answer=lambda report, stop: Answer(rate=10.0)),
        _stop=threading.Event(),
        recreated=(),
        flow="A->B",
        plan=SimpleNamespace(commit_interval_ms=200),
    )
    copy._moved, copy._attempts = set(), {}
    on_report = stream_module.StreamingCopy._on_report
    assert on_report(copy, Report(0, 0)) == Answer(rate=10.0)  # type: ignore[arg-type]
    stream_module.StreamingCopy.topics_recreated(copy, [("t", "id-1", "id-2")])  # type: ignore[arg-type]
    assert on_report(copy, Report(1, 0)) == Answer(rate=10.0, recreated=(("t", "id-1", "id-2"),))  # type: ignore[arg-type]


def test_a_report_that_moves_a_topic_marks_it_for_the_next_look() -> None:
    """A position that changed (copied or read further) marks its topic; one reported as it was does not.
    The flow's lag follows the reports."""
    copy = SimpleNamespace(
        _lock=threading.Lock(),
        reported=set(),
        positions={("a", 0): (5, 9, 5), ("b", 0): (7, 7, 7)},
        lag=4,
        _moved=set(),
        _attempts={},
        _error=None,
        recorder=SimpleNamespace(metrics=None),
        throttle=SimpleNamespace(answer=lambda report, stop: Answer()),
        _stop=threading.Event(),
        recreated=(),
        flow="A->B",
        plan=SimpleNamespace(commit_interval_ms=200),
    )
    take = stream_module.StreamingCopy.take_moved
    on_report = stream_module.StreamingCopy._on_report
    on_report(copy, Report(0, 0, positions=[("a", 0, 5, 12, 5), ("b", 0, 7, 7, 7)]))  # type: ignore[arg-type]
    assert take(copy) == set()  # only an end rose: nothing more read
    on_report(copy, Report(0, 0, positions=[("a", 0, 5, 12, 6), ("c", 0, 0, 3, 0)]))  # type: ignore[arg-type]
    assert take(copy) == {"a", "c"}  # read past a marker; a partition new to the job
    assert take(copy) == set()
    # The flow's lag, kept as reports come: a's end 12 past 5, c's 3 past 0, b none.
    assert copy.lag == 7 + 3
    on_report(copy, Report(0, 0, positions=[("a", 0, 12, 11, 12), ("b", 0, 7, 9, 7)]))  # type: ignore[arg-type]
    assert copy.lag == 0 + 2 + 3  # a's end never goes back (12); b's rose
    # A task's second attempt took over: a late report of the first (a zombie) moves nothing, since
    # a task sends only what changed and the driver would keep the zombie's positions.
    on_report(copy, Report(0, 1, positions=[("a", 0, 12, 12, 12)]))  # type: ignore[arg-type]
    on_report(copy, Report(0, 0, positions=[("a", 0, 3, 12, 3)]))  # type: ignore[arg-type]
    assert copy.positions[("a", 0)] == (12, 12, 12) and copy.lag == 0 + 2 + 3


def test_a_deleted_topic_is_not_looked_at_again_until_it_is_read_or_every_topic_is_due(
    flow: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A topic deleted and not re-created answers "unknown topic": it has no id to compare, and until it is
    re-created nothing of it is read, so it is not carried into each look (nor said every 5 s)."""
    job = flow.copy_job = Job({"a": "id-a", "gone": "id-g"})
    flow.watch()
    Look.made[-1].gone = {"gone"}
    _answer_last(flow, {"a": "id-a"})
    for _ in range(3):
        flow.clock[0] += flow_module.TOPIC_IDS_EVERY_S
        flow.watch()
    assert len(Look.made) == 1 and "not looked at" not in caplog.text
    job.moved = {"gone"}  # re-created and read: its next look
    flow.clock[0] += flow_module.TOPIC_IDS_EVERY_S
    flow.watch()
    assert Look.made[-1].topics == ["gone"]


def test_a_look_tells_a_topic_the_source_does_not_know_from_one_it_did_not_answer_for() -> None:
    """``TopicIdLook.ids``: "unknown topic" (deleted) is neither an id nor a failure to look again at."""
    from concurrent.futures import Future

    from confluent_kafka import KafkaError, KafkaException

    from sparkmirror.kafka.topicids import TopicIdLook

    def answered(result: Any = None, error: int | None = None) -> Future[Any]:
        fut: Future[Any] = Future()
        if error is None:
            fut.set_result(result)
        else:
            fut.set_exception(KafkaException(KafkaError(error)))
        return fut

    look = TopicIdLook.__new__(TopicIdLook)
    look.futures = {
        "a": answered(SimpleNamespace(topic_id="id-a")),
        "gone": answered(error=KafkaError.UNKNOWN_TOPIC_OR_PART),
        "slow": answered(error=KafkaError._TIMED_OUT),
        "waiting": Future(),
    }
    ids, failed = look.ids()
    assert ids == {"a": "id-a"} and sorted(failed) == ["slow"]
