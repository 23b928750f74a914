"""A run's stop tells every flow's tasks first and counts each flow's wait from then (no Spark, no Kafka):
flows stopped one after another would otherwise each start their wait only when their turn came."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from sparkmirror.config import load_config
from sparkmirror.pipeline.driver import stream
from sparkmirror.pipeline.driver.mirror import Mirror
from sparkmirror.pipeline.driver.stream import StreamingCopy

CONFIG = """\
clusters = A, B
A.bootstrap.servers = 127.0.0.1:1
B.bootstrap.servers = 127.0.0.1:2
A->B.enabled = true
B->A.enabled = true
"""


def test_every_flows_tasks_are_told_before_any_flow_is_waited_for() -> None:
    mirror = Mirror(load_config(CONFIG))
    calls: list[tuple[str, str]] = []

    def supervisor(name: str) -> SimpleNamespace:
        flow = SimpleNamespace(request_copy_stop=lambda: calls.append(("told", name)))
        return SimpleNamespace(flow=flow, stop=lambda: calls.append(("stopped", name)))

    mirror.supervisors = [supervisor("A->B"), supervisor("B->A")]  # type: ignore[list-item]
    mirror._stop_flows()
    assert calls == [("told", "A->B"), ("told", "B->A"), ("stopped", "A->B"), ("stopped", "B->A")]


def test_a_flows_wait_for_its_tasks_counts_from_the_first_word(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "STOP_WAIT_S", 1.0)
    monkeypatch.setattr(stream, "CANCEL_WAIT_S", 0.0)
    hung = threading.Event()  # tasks that never stop
    cancelled: list[str] = []
    copy = object.__new__(StreamingCopy)  # only what a stop touches; no Spark session, no report server
    copy.flow = "A->B"
    copy.group_id = "g"
    copy.token = "t"
    copy._stop = threading.Event()
    copy._stop_asked = None
    copy._thread = threading.Thread(target=hung.wait, daemon=True)
    copy.spark = SimpleNamespace(sparkContext=SimpleNamespace(cancelJobGroup=cancelled.append))  # type: ignore[assignment]
    copy.server = SimpleNamespace(unregister=lambda token: None)  # type: ignore[assignment]
    copy._thread.start()
    try:
        copy.request_stop()
        assert copy._stop.is_set()
        time.sleep(1.0)  # another flow's stop took the whole wait meanwhile
        began = time.monotonic()
        copy.stop()
        assert cancelled == ["g"]
        assert time.monotonic() - began < 0.5  # not another STOP_WAIT_S of its own
    finally:
        hung.set()
