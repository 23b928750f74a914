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
    def __init__(self, ids: dict[str, str]) -> None:
        self.plan = SimpleNamespace(topic_ids=ids)
        self.recreated: tuple[tuple[str, str, str], ...] = ()

    def topics_recreated(self, changed: list[tuple[str, str, str]]) -> None:
        stream_module.StreamingCopy.topics_recreated(self, changed)  # type: ignore[arg-type]


class Look:
    """A look the test answers: ``ids`` once ``answered``."""

    made: list[Look] = []

    def __init__(self, admin: object, topics: Any, *, timeout_s: float) -> None:
        self.topics = sorted(topics)
        self.answered = False
        self.current: dict[str, str] = {}
        Look.made.append(self)

    def done(self) -> bool:
        return self.answered

    def ids(self) -> tuple[dict[str, str], dict[str, str]]:
        return self.current, {}


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


def test_the_same_ids_are_looked_at_again_every_interval(flow: Any) -> None:
    job = flow.copy_job = Job({"a": "id-a"})
    flow.watch()
    Look.made[0].current, Look.made[0].answered = {"a": "id-a"}, True
    for _ in range(4):  # answered: read at the next turn; the next look when the interval is up
        flow.clock[0] += 1
        flow.watch()
    assert len(Look.made) == 1
    flow.clock[0] += flow_module.TOPIC_IDS_EVERY_S
    flow.watch()
    assert len(Look.made) == 2 and job.recreated == ()


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
        positions_version=0,
        _error=None,
        recorder=SimpleNamespace(metrics=None),
        throttle=SimpleNamespace(answer=lambda report, stop: Answer(rate=10.0)),
        _stop=threading.Event(),
        recreated=(),
        flow="A->B",
        plan=SimpleNamespace(commit_interval_ms=200),
    )
    on_report = stream_module.StreamingCopy._on_report
    assert on_report(copy, Report(0, 0)) == Answer(rate=10.0)  # type: ignore[arg-type]
    stream_module.StreamingCopy.topics_recreated(copy, [("t", "id-1", "id-2")])  # type: ignore[arg-type]
    assert on_report(copy, Report(1, 0)) == Answer(rate=10.0, recreated=(("t", "id-1", "id-2"),))  # type: ignore[arg-type]
