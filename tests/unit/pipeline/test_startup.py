"""Waiting for the clusters at start: what is said, how long, when it gives up (no Kafka: a probe)."""

from __future__ import annotations

import logging
import threading

import pytest

from sparkmirror.config import load_config
from sparkmirror.pipeline.driver import startup
from sparkmirror.pipeline.driver.startup import StartupTimeout, wait_for_clusters

CONFIG = """\
clusters = A, B
A.bootstrap.servers = 127.0.0.1:1
B.bootstrap.servers = 127.0.0.1:2
A->B.enabled = true
"""


@pytest.fixture(autouse=True)
def _no_sleeping(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(startup, "STARTUP_BACKOFF_S", (0.01,))


def test_waits_for_a_cluster_that_is_down_saying_which_and_why(caplog: pytest.LogCaptureFixture) -> None:
    answers = {"127.0.0.1:1": [True], "127.0.0.1:2": [False, False, True]}

    def probe(conf: dict[str, str]) -> str:
        if not answers[conf["bootstrap.servers"]].pop(0):
            raise OSError("connection refused")
        return "id"

    flows = load_config(CONFIG).flows
    with caplog.at_level(logging.INFO, logger="sparkmirror.pipeline.driver.startup"):
        assert wait_for_clusters(flows, timeout_ms=-1, stop=threading.Event(), probe=probe)
    waits = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(waits) == 2
    assert "waiting for cluster B (127.0.0.1:2), needed by flow A->B (target)" in waits[0]
    assert "OSError: connection refused" in waits[0]
    assert "sparkmirror.startup.timeout.ms = unlimited" in waits[0]
    assert any("cluster B (127.0.0.1:2) answers" in r.getMessage() for r in caplog.records)


def test_gives_up_after_the_startup_timeout_naming_the_cluster() -> None:
    def probe(conf: dict[str, str]) -> str:
        if conf["bootstrap.servers"] == "127.0.0.1:1":
            raise OSError("connection refused")
        return "id"

    with pytest.raises(StartupTimeout, match=r"cluster A \(127.0.0.1:1\) did not answer within .* = 50"):
        wait_for_clusters(load_config(CONFIG).flows, timeout_ms=50, stop=threading.Event(), probe=probe)


def test_a_stop_request_ends_the_wait() -> None:
    stop = threading.Event()

    def probe(_conf: dict[str, str]) -> str:
        stop.set()
        raise OSError("down")

    assert not wait_for_clusters(load_config(CONFIG).flows, timeout_ms=-1, stop=stop, probe=probe)


def test_startup_timeout_key() -> None:
    cfg = load_config(CONFIG + "sparkmirror.startup.timeout.ms = 30000\n")
    assert cfg.spark.startup_timeout_ms == 30000
    assert load_config(CONFIG).spark.startup_timeout_ms == -1
