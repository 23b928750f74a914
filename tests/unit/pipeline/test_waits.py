"""A task's waits on the target (pipeline/executor/waits.py) without a broker: bounded, said, retriable.

The broker-side case (a group coordinator SIGKILLed under an exactly-once task) is
tests/e2e/test_broker_faults.py; here the calls are plain functions that answer late, never, or fail.
"""

from __future__ import annotations

import logging
import threading
import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from sparkmirror.pipeline.exceptions import WriteError
from sparkmirror.pipeline.executor import waits
from sparkmirror.pipeline.executor.waits import call_within, retry_within


def test_a_call_that_never_answers_fails_the_task_within_its_limit_saying_what_it_waits_for(
    caplog: pytest.LogCaptureFixture,
) -> None:
    never = threading.Event()
    nudges: list[float] = []
    started = time.monotonic()
    try:
        with caplog.at_level(logging.WARNING), pytest.raises(WriteError) as raised:
            call_within(
                lambda: never.wait(10),  # without the bound: returns after 10 s, and the test fails
                what="flow=A->B t[0] offsets 0..9: send_offsets_to_transaction",
                limit_s=1.0,
                detail=lambda: "waiting for the coordinator of group g (brokers 2, 3)",
                nudge=lambda: nudges.append(time.monotonic()),
                warn_every_s=0.2,
                nudge_every_s=0.1,
            )
    finally:
        never.set()  # lets the abandoned call's thread end
    took = time.monotonic() - started
    assert 1.0 <= took < 5.0
    assert raised.value.retriable, "a wait past its limit must fail the task, not stop the flow"
    message = str(raised.value)
    assert "send_offsets_to_transaction" in message and "group g" in message and "t[0]" in message
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings, "a wait of more than its warning interval must say what it waits for"
    assert all("send_offsets_to_transaction" in w and "brokers 2, 3" in w for w in warnings)
    assert len(nudges) >= 3


def test_a_call_unblocked_by_a_metadata_refresh_returns_its_result() -> None:
    refreshed = threading.Event()

    def call() -> str:
        assert refreshed.wait(5)
        return "committed"

    assert call_within(call, what="x", limit_s=5, nudge=refreshed.set, nudge_every_s=0.05) == "committed"


def test_the_call_s_own_error_reaches_the_caller() -> None:
    def call() -> None:
        raise KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))

    with pytest.raises(KafkaException):
        call_within(call, what="x", limit_s=5)


def test_a_call_stuck_while_its_coordinator_answers_another_client_fails_after_the_probe_threshold_not_the_limit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    never = threading.Event()
    probes: list[tuple[float, float]] = []
    started = time.monotonic()

    def probe(timeout_s: float) -> str:
        probes.append((time.monotonic() - started, timeout_s))
        return "the coordinator of group g answers the task's progress consumer"

    try:
        with caplog.at_level(logging.WARNING), pytest.raises(WriteError) as raised:
            call_within(
                lambda: never.wait(30),  # without the probe: fails at the limit, 20 s, and the test fails
                what="flow=A->B t[0] offsets 0..9: send_offsets_to_transaction(tx)",
                limit_s=20.0,
                probe=probe,
                probe_after_s=0.5,
                probe_confirm_s=0.4,
                nudge_every_s=0.2,
            )
    finally:
        never.set()
    took = time.monotonic() - started
    assert 0.9 <= took < 3.0, f"gave up after {took:.1f}s: at the probe's threshold and confirmation, not the limit"
    assert raised.value.retriable, "a stuck call fails the task for a retry, as at the limit"
    message = str(raised.value)
    assert "send_offsets_to_transaction(tx)" in message and "group g answers" in message and "#5511" in message
    assert any("#5511" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    # Asked once the threshold has passed, no more often than the nudge, within a short timeout.
    assert probes and probes[0][0] >= 0.5
    assert all(b - a >= 0.2 for (a, _), (b, _) in zip(probes, probes[1:], strict=False))
    assert all(0 < t <= 5.0 for _, t in probes)


def test_a_probe_that_misses_an_answer_starts_its_confirmation_again() -> None:
    never = threading.Event()
    answers = iter(["the coordinator answers", None] * 1000)  # answers at every other probe only

    started = time.monotonic()
    try:
        with pytest.raises(WriteError) as raised:
            call_within(
                lambda: never.wait(30),
                what="x",
                limit_s=2.0,
                probe=lambda _t: next(answers),
                probe_after_s=0.1,
                probe_confirm_s=0.15,
                nudge_every_s=0.1,
            )
    finally:
        never.set()
    assert time.monotonic() - started >= 2.0, "never answered for 0.15 s in a row: the limit decides"
    assert "#5511" not in str(raised.value) and "within 2s" in str(raised.value)


def test_a_call_that_answers_late_is_returned_while_the_probe_has_no_answer() -> None:
    probes: list[float] = []

    def call() -> str:
        time.sleep(1.0)
        return "committed"

    def probe(_timeout_s: float) -> None:
        probes.append(time.monotonic())  # the coordinator does not answer the other client either
        return None

    assert call_within(call, what="x", limit_s=20, probe=probe, probe_after_s=0.2, nudge_every_s=0.1) == "committed"
    assert len(probes) >= 3, "the probe was asked while the call waited, and its lack of answer proved nothing"


def test_a_probe_that_raises_is_ignored() -> None:
    probes: list[float] = []

    def call() -> str:
        time.sleep(1.0)
        return "committed"

    def probe(_timeout_s: float) -> str:
        probes.append(time.monotonic())
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "timed out", retriable=True))

    assert call_within(call, what="x", limit_s=20, probe=probe, probe_after_s=0.2, nudge_every_s=0.1) == "committed"
    assert len(probes) >= 3


def test_a_call_that_answers_while_the_probe_runs_is_returned_not_failed() -> None:
    release = threading.Event()

    def call() -> str:
        assert release.wait(10)
        return "committed"

    def probe(_timeout_s: float) -> str:
        release.set()  # the call answers while the other client is being asked
        time.sleep(0.3)
        return "the coordinator of group g answers the task's progress consumer"

    assert call_within(call, what="x", limit_s=20, probe=probe, probe_after_s=0.2, nudge_every_s=0.1) == "committed"


def test_retriable_errors_are_retried_with_a_warning_each_then_the_answer_is_returned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    attempts: list[float] = []

    def call(left: float) -> int:
        attempts.append(left)
        if len(attempts) < 3:
            raise KafkaException(KafkaError(KafkaError.COORDINATOR_NOT_AVAILABLE, "coordinator moving"))
        return 42

    with caplog.at_level(logging.WARNING):
        assert retry_within(call, what="flow=A->B reading the progress", limit_s=10, quiet_s=0) == 42
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and all("COORDINATOR_NOT_AVAILABLE" in w for w in warnings)
    assert all(0 < left <= 10 for left in attempts)


def test_retries_soon_after_the_first_attempt_are_routine_not_warnings(caplog: pytest.LogCaptureFixture) -> None:
    attempts: list[float] = []

    def call(left: float) -> int:
        attempts.append(left)
        if len(attempts) < 2:
            raise KafkaException(KafkaError(KafkaError.NOT_COORDINATOR, "coordinator moved"))
        return 1

    with caplog.at_level(logging.DEBUG):
        assert retry_within(call, what="x", limit_s=10, quiet_s=5) == 1
    levels = [r.levelno for r in caplog.records if "NOT_COORDINATOR" in r.getMessage()]
    assert levels == [logging.DEBUG]


def test_retriable_errors_past_the_limit_fail_the_task_naming_the_last_error() -> None:
    def call(_left: float) -> None:
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "timed out", retriable=True))

    started = time.monotonic()
    with pytest.raises(WriteError) as raised:
        retry_within(call, what="flow=A->B t[0]: init_transactions(tx)", limit_s=0.5, detail=lambda: "brokers 1")
    assert time.monotonic() - started < 3
    assert raised.value.retriable
    assert "_TIMED_OUT" in str(raised.value) and "init_transactions(tx)" in str(raised.value)


def test_an_error_kafka_does_not_call_retriable_is_raised_at_once() -> None:
    calls: list[float] = []

    def call(left: float) -> None:
        calls.append(left)
        raise KafkaException(KafkaError(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "no"))

    with pytest.raises(KafkaException):
        retry_within(call, what="x", limit_s=10)
    assert len(calls) == 1


def test_a_call_that_blocks_for_its_whole_timeout_says_what_it_waits_for_after_each_attempt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """commit_transaction flushing to a slow target blocks for the whole timeout it is given: each
    attempt is cut to the warning interval, so the wait is reported at that pace, not once a minute."""
    attempts: list[float] = []

    def call(left: float) -> int:
        attempts.append(left)
        if len(attempts) < 4:
            time.sleep(left)  # librdkafka waited its whole timeout
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "timed out", retriable=True))
        return 7

    with caplog.at_level(logging.WARNING):
        got = retry_within(
            call, what="flow=A->B t[0]: commit_transaction(tx)", limit_s=30, quiet_s=0, attempt_s=0.2,
            detail=lambda: "waiting for the transaction coordinator of tx", max_delay_s=0.01,
        )  # fmt: skip
    assert got == 7
    assert all(left <= 0.2 for left in attempts)
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "commit_transaction(tx)" in r.getMessage()
    ]
    assert len(warnings) == 3  # one after each timed-out attempt
    assert all("_TIMED_OUT" in w and "transaction coordinator of tx" in w for w in warnings)


def test_no_attempt_outlasts_the_warning_interval() -> None:
    assert waits.ATTEMPT_S <= waits.WARN_EVERY_S


def test_a_timed_out_attempt_is_retried_even_without_the_retriable_flag() -> None:
    """The consumer's committed() raises _TIMED_OUT without librdkafka's retriable flag; an attempt
    cut to the warning interval must not fail the task before its limit."""
    attempts: list[float] = []

    def call(left: float) -> int:
        attempts.append(left)
        if len(attempts) < 3:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "Local: Timed out"))
        return 5

    assert retry_within(call, what="flow=A->B reading the progress", limit_s=10, max_delay_s=0.01) == 5
    assert len(attempts) == 3


def test_a_timeout_that_requires_an_abort_is_raised_at_once_not_retried() -> None:
    """send_offsets_to_transaction's timeout makes the transaction abortable: never retried."""
    calls: list[float] = []

    def call(left: float) -> None:
        calls.append(left)
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "timed out", txn_requires_abort=True))

    with pytest.raises(KafkaException):
        retry_within(call, what="x", limit_s=10)
    assert len(calls) == 1
