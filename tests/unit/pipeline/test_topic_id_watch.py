"""The driver's look for source topics deleted and re-created while the copy runs (one request for the
flow; its tasks learn it from their next answer)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from sparkmirror.pipeline.driver import flow as flow_module
from sparkmirror.pipeline.driver.flow import Flow


class Job:
    def __init__(self, ids: dict[str, str]) -> None:
        self.plan = SimpleNamespace(topic_ids=ids)
        self.recreated: tuple[tuple[str, str, str], ...] = ()
        self.told: list[dict[str, tuple[str, str]]] = []

    def topics_recreated(self, changed: dict[str, tuple[str, str]]) -> None:
        self.told.append(changed)
        self.recreated = tuple(sorted((t, a, b) for t, (a, b) in changed.items()))


def _watch(monkeypatch: pytest.MonkeyPatch, job: Job, current: dict[str, str] | Exception) -> list[Any]:
    asked: list[Any] = []

    def source_topic_ids(admin: object, topics: Any, *, timeout_s: float) -> dict[str, str]:
        asked.append((sorted(topics), timeout_s))
        if isinstance(current, Exception):
            raise current
        return current

    monkeypatch.setattr(flow_module, "source_topic_ids", source_topic_ids)
    clients = SimpleNamespace(source_admin=object())
    me = SimpleNamespace(copy_job=job, clients=clients, flow=SimpleNamespace(name="A->B"))
    Flow._watch_topic_ids(me)  # type: ignore[arg-type]
    return asked


def test_a_topic_with_another_id_is_told_to_the_job_and_looked_at_no_more(monkeypatch: pytest.MonkeyPatch) -> None:
    job = Job({"a": "id-a", "b": "id-b", "c": "id-c"})
    # "c" is gone (deleted, not re-created): the deletion is the topic refresh's to handle, not this.
    asked = _watch(monkeypatch, job, {"a": "id-a", "b": "id-b2"})
    assert asked == [(["a", "b", "c"], flow_module._TOPIC_IDS_WAIT_S)]
    assert job.told == [{"b": ("id-b", "id-b2")}] and job.recreated == (("b", "id-b", "id-b2"),)
    assert _watch(monkeypatch, job, {"a": "id-a2"}) == []  # told once: the job's tasks fail on it


def test_the_same_ids_or_an_unanswered_look_tell_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    job = Job({"a": "id-a"})
    _watch(monkeypatch, job, {"a": "id-a"})
    _watch(monkeypatch, job, RuntimeError("source unreachable"))
    assert job.told == [] and job.recreated == ()
