"""Every Kafka client comes from kafka/factory.py, so librdkafka's lines go through Python logging."""

from __future__ import annotations

import logging
import pickle
import re
import threading
from pathlib import Path

import pytest

from sparkmirror.kafka.factory import LOGGER_NAME, LibrdkafkaLog, close_within

SRC = Path(__file__).resolve().parents[3] / "src" / "sparkmirror"

#: The one client made directly: created and dropped at once to validate settings, with
#: ``log_level`` 0 (a log callback from a client being destroyed crashed the interpreter once).
_ALLOWED = {("kafka/clients.py", "Producer(quiet)")}


def test_no_module_makes_a_kafka_client_but_the_factory() -> None:
    made = re.compile(r"(?<![\w.])(Producer|Consumer|AdminClient)\(")
    found = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if rel == "kafka/factory.py":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if made.search(code) and ">>>" not in line and not code.lstrip().startswith(("class ", "def ")):
                if not any(rel == f and s in code for f, s in _ALLOWED):
                    found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, "make Kafka clients with sparkmirror.kafka.factory:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "line",
    [
        "FAIL [rdkafka#producer-1] [thrd:b:9092/bootstrap]: b:9092/bootstrap: Connect to ipv4#127.0.0.1:9092 failed: "
        "Connection refused (after 0ms in state CONNECT)",
        "GETPID [rdkafka#producer-39] [thrd:main]: Failed to acquire idempotence PID from broker b:9092/1: "
        "Broker: Coordinator load in progress: retrying",
        "ERROR [rdkafka#consumer-2] [thrd:app]: 1/1 brokers are down",
    ],
)
def test_a_broker_that_is_away_is_said_at_info_not_as_a_warning(line: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger=LOGGER_NAME):
        LibrdkafkaLog().log(logging.ERROR, line)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [(logging.INFO, line)]


def test_other_client_lines_keep_their_level(caplog: pytest.LogCaptureFixture) -> None:
    line = "SSL [rdkafka#producer-1] [thrd:app]: certificate verify failed"
    with caplog.at_level(logging.DEBUG, logger=LOGGER_NAME):
        LibrdkafkaLog().log(logging.ERROR, line)
    assert [r.levelno for r in caplog.records] == [logging.ERROR]


def test_the_log_travels_to_executors_and_keeps_client_cache_keys_stable() -> None:
    log = LibrdkafkaLog()
    copy = pickle.loads(pickle.dumps(log))
    assert copy == log and hash(copy) == hash(log) and repr(copy) == repr(log)


def test_close_within_leaves_a_close_that_waits_past_its_limit_behind() -> None:
    release = threading.Event()
    assert close_within(lambda: None, 1.0, "quick") is True
    assert close_within(lambda: release.wait(10), 0.2, "stuck") is False  # returns at its limit
    release.set()


def test_close_within_counts_a_close_that_raises_as_closed() -> None:
    def refused() -> None:
        raise RuntimeError("broker gone")

    assert close_within(refused, 1.0, "refused") is True
