"""A flow's stop counts its wait for its tasks from the first word to them (no Spark, no Kafka): a run tells
every flow's tasks first, then stops the flows one after another (test_flow_isolation.py), and each flow's
wait would otherwise begin only at its turn."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from sparkmirror.pipeline.driver import stream
from sparkmirror.pipeline.driver.stream import StreamingCopy


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
