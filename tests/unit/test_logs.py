"""Log set-up (sparkmirror/logs.py): an executor's Python worker says its warnings as the driver does,
and a process that has handlers is left alone."""

from __future__ import annotations

import logging
import re

import pytest

from sparkmirror.logs import worker_logging


def test_a_worker_s_warnings_are_formatted_like_the_driver_s(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ours = logging.getLogger("sparkmirror")
    # A Python worker as PySpark starts it: no handler anywhere (pytest's own are set aside).
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    monkeypatch.setattr(ours, "handlers", [])
    worker_logging()
    worker_logging()  # every task calls it: once per process
    assert len(ours.handlers) == 1
    sink_log = logging.getLogger("sparkmirror.pipeline.executor.sink")
    sink_log.warning("flow=A->B t[0] offsets 1..2: the producer's queue is full")
    sink_log.info("flow=A->B t[0] an info line the worker keeps to itself")
    err = capsys.readouterr().err
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} WARNING sparkmirror\.pipeline\.executor\.sink: "
        r"flow=A->B t\[0\] offsets 1\.\.2: the producer's queue is full\n",
        err,
    ), err


def test_a_process_with_handlers_gets_no_second_one(monkeypatch: pytest.MonkeyPatch) -> None:
    ours = logging.getLogger("sparkmirror")
    monkeypatch.setattr(logging.getLogger(), "handlers", [logging.NullHandler()])  # the CLI's, or Spark's task logging
    monkeypatch.setattr(ours, "handlers", [])
    worker_logging()
    assert ours.handlers == []
