"""The supervisor's rules without Spark: what stops a flow, what is retried, how long it waits."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from sparkmirror.kafka.access import AccessDenied, classify, denied
from sparkmirror.pipeline.driver import supervisor as sup
from sparkmirror.pipeline.driver.flow import CONFIG_SYNC, REFRESH
from sparkmirror.pipeline.driver.scheduler import Scheduler
from sparkmirror.pipeline.exceptions import TERMINAL_MARKER, FlowFailed


class Query:
    def __init__(self, error: BaseException | None) -> None:
        self.isActive = False
        self.error = error


class StandInFlow:
    """What the supervisor uses of a Flow."""

    def __init__(self, *, once: bool = False) -> None:
        self.flow = SimpleNamespace(name="A->B")
        self.once = once
        self.stop_requested = threading.Event()
        self.progress = SimpleNamespace(restarts=0)
        self.recorder = SimpleNamespace(succeeded=False)
        self.scheduler = Scheduler()
        self.copy_job: Query | None = None
        self.finished = False
        self.starts = 0
        self.polls = 0
        self.metrics = None
        #: Every state the supervisor reported, with its error.
        self.reports: list[tuple[str, str | None]] = []

    def report(self, state: str, error: str | None = None) -> None:
        self.reports.append((state, error))

    def start(self) -> None:
        self.starts += 1

    def poll(self) -> None:
        self.polls += 1

    def take_ended_copy(self) -> BaseException | None:
        assert self.copy_job is not None
        error, self.copy_job = self.copy_job.error, None
        return error

    def finish(self) -> None:
        self.finished = True

    def access_denied(self, text: str, *, copying: bool = False) -> AccessDenied | None:
        found = classify(text)
        if found is None:
            return None
        return denied(*found, flow="A->B", cluster="A" if copying else "B", who="User:app", operation="op")


def _ended(flow: StandInFlow, error: BaseException | None) -> sup.FlowSupervisor:
    s = sup.FlowSupervisor(flow)  # type: ignore[arg-type]
    flow.copy_job = Query(error)
    return s


def test_a_terminal_error_stops_the_flow_with_its_own_sentence() -> None:
    flow = StandInFlow()
    s = _ended(flow, RuntimeError(f"Py4JJavaError ... {TERMINAL_MARKER} flow=A->B t[0] offset=7: refused\n at ..."))
    with pytest.raises(FlowFailed, match=r"^flow=A->B t\[0\] offset=7: refused$"):
        s.poll()


def test_an_access_failure_of_the_copy_stops_the_flow_at_once() -> None:
    text = (
        "Py4JJavaError ...\norg.apache.kafka.common.errors.TopicAuthorizationException: "
        "Not authorized to access topics: [t]\n"
    )
    s = _ended(StandInFlow(), RuntimeError(text))
    with pytest.raises(AccessDenied, match=r"cluster A refused User:app: not authorized to op") as err:
        s.poll()
    assert err.value.exit_code == 1 and s.failures == 0


def test_an_authentication_failure_while_starting_stops_the_flow_with_exit_2() -> None:
    flow = StandInFlow()

    def refused() -> None:
        raise RuntimeError("KafkaError{code=SASL_AUTHENTICATION_FAILED,val=58,str=...}")

    flow.start = refused  # type: ignore[method-assign]
    s = sup.FlowSupervisor(flow)  # type: ignore[arg-type]
    s._restart_at = 0.0
    with pytest.raises(AccessDenied, match="cluster B refused authentication as User:app") as err:
        s.poll()
    assert err.value.exit_code == 2


def test_an_executor_environment_error_stops_the_flow() -> None:
    s = _ended(StandInFlow(), RuntimeError("...\nModuleNotFoundError: No module named 'confluent_kafka'\n..."))
    with pytest.raises(FlowFailed, match="cannot run: ModuleNotFoundError: No module named 'confluent_kafka'"):
        s.poll()


def test_any_other_copy_failure_is_replayed_after_a_back_off(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(sup.time, "monotonic", lambda: clock[0])
    flow = StandInFlow()
    s = _ended(flow, RuntimeError("TimeoutException: broker down"))
    s.poll()
    assert (s.failures, flow.starts) == (1, 0)
    clock[0] += sup.RESTART_BACKOFF_S[0]
    s.poll()
    assert flow.starts == 1 and flow.progress.restarts == 1


def test_a_copy_that_failed_while_stopping_ends_the_flow_without_a_restart() -> None:
    flow = StandInFlow()
    flow.stop_requested.set()
    s = _ended(flow, RuntimeError("sparkmirror.pipeline.exceptions.WriteError: t[0]: delivery timed out"))
    s.poll()
    assert flow.finished and s.failures == 0 and s._restart_at is None
    assert not [state for state, _ in flow.reports if state == "restarting"]


def test_a_copy_that_ends_cleanly_finishes_the_flow() -> None:
    flow = StandInFlow(once=True)
    _ended(flow, None).poll()
    assert flow.finished


def test_once_gives_up_after_five_failures_in_a_row(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    monkeypatch.setattr(sup.time, "monotonic", lambda: clock[0])
    flow = StandInFlow(once=True)
    s = sup.FlowSupervisor(flow)  # type: ignore[arg-type]
    with pytest.raises(FlowFailed, match="failed 5 times in a row: TimeoutException"):
        for _ in range(4 * sup.ONCE_MAX_FAILURES):  # each failure: a back-off, a restart, a new copy
            flow.copy_job = Query(RuntimeError("TimeoutException: broker down"))
            s.poll()
            clock[0] += 100
    assert s.failures == sup.ONCE_MAX_FAILURES and flow.starts == sup.ONCE_MAX_FAILURES - 1


def test_a_failing_chore_makes_refresh_and_config_sync_due_after_the_back_off(monkeypatch: pytest.MonkeyPatch) -> None:
    flow = StandInFlow()
    flow.scheduler.every(REFRESH, 600, lambda: None)
    flow.scheduler.every(CONFIG_SYNC, 600, lambda: None)
    flow.copy_job = Query(None)
    flow.copy_job.isActive = True

    def boom() -> None:
        raise RuntimeError("KafkaException: _TIMED_OUT")

    monkeypatch.setattr(flow, "poll", boom)
    s = sup.FlowSupervisor(flow)  # type: ignore[arg-type]
    s.poll()
    due = {c.name: c.due - flow.scheduler.clock() for c in flow.scheduler.chores.values()}
    assert s.failures == 1
    assert all(0 < d <= sup.RESTART_BACKOFF_S[0] for d in due.values()), due


def test_a_committed_batch_resets_the_failure_count() -> None:
    flow = StandInFlow()
    s = sup.FlowSupervisor(flow)  # type: ignore[arg-type]
    s.failures = 3
    flow.recorder.succeeded = True
    s.poll()
    assert s.failures == 0 and flow.polls == 1


def test_a_first_start_that_fails_is_tried_again_after_the_back_off(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(sup.time, "monotonic", lambda: clock[0])
    flow = StandInFlow()
    attempts: list[int] = []

    def start() -> None:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("KafkaException: _TIMED_OUT")

    flow.start = start  # type: ignore[method-assign]
    s = sup.FlowSupervisor(flow)  # type: ignore[arg-type]
    s.start()  # does not raise: a cluster gone since the run's start check is waited for
    assert (s.failures, len(attempts)) == (1, 1)
    clock[0] += sup.RESTART_BACKOFF_S[0]
    s.poll()
    assert len(attempts) == 2


def test_a_first_start_that_fails_for_good_raises() -> None:
    flow = StandInFlow()

    def start() -> None:
        raise FlowFailed("checkpoint of another cluster")

    flow.start = start  # type: ignore[method-assign]
    with pytest.raises(FlowFailed):
        sup.FlowSupervisor(flow).start()  # type: ignore[arg-type]


def test_a_terminal_error_is_reported_as_failed_with_its_sentence() -> None:
    flow = StandInFlow()
    s = _ended(flow, RuntimeError(f"Py4JJavaError ... {TERMINAL_MARKER} flow=A->B t[0] offset=7: refused\n at ..."))
    with pytest.raises(FlowFailed):
        s.poll()
    assert flow.reports[-1][0] == "failed"
    assert "t[0] offset=7" in (flow.reports[-1][1] or "")


def test_a_failed_copy_is_reported_as_restarting_with_its_error() -> None:
    flow = StandInFlow()
    s = _ended(flow, RuntimeError("broker went away"))
    s.poll()
    assert flow.reports == [("restarting", "broker went away")]


def test_a_copy_whose_thread_died_without_an_error_is_replayed_not_finished(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark records no error when its stream thread dies of a JVM error (a StackOverflowError in its
    own error handling): in a run without --once that is a failure to replay, never a finished flow."""
    clock = [1000.0]
    monkeypatch.setattr(sup.time, "monotonic", lambda: clock[0])
    flow = StandInFlow()
    s = _ended(flow, None)
    s.poll()
    assert not flow.finished and s.failures == 1
    assert flow.reports[-1][0] == "restarting" and "ended without an error" in (flow.reports[-1][1] or "")
    clock[0] += sup.RESTART_BACKOFF_S[0]
    s.poll()
    assert flow.starts == 1


def test_a_stopped_copy_without_an_error_finishes_the_flow() -> None:
    flow = StandInFlow()
    flow.stop_requested.set()
    _ended(flow, None).poll()
    assert flow.finished


def test_a_long_terminal_error_stops_the_flow_with_its_whole_sentence() -> None:
    flow = StandInFlow()
    sentence = "flow=A->B t[0] offset=7: refused for good " + "x" * 500
    s = _ended(flow, RuntimeError(f"Py4JJavaError: ... {TERMINAL_MARKER} {sentence}\n at ..."))
    with pytest.raises(FlowFailed) as err:
        s.poll()
    assert str(err.value) == sentence


def test_a_failed_copy_is_reported_by_what_failed_not_by_the_py4j_wrapper() -> None:
    flow = StandInFlow()
    s = _ended(
        flow,
        RuntimeError(
            "Py4JJavaError: An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.\n"
            ": org.apache.spark.SparkException: Job aborted due to stage failure: ...\n"
            "sparkmirror.pipeline.exceptions.WriteError: flow=A->B t[0] offsets 5..9: transaction not committed\n"
        ),
    )
    s.poll()
    assert flow.reports == [
        (
            "restarting",
            "sparkmirror.pipeline.exceptions.WriteError: flow=A->B t[0] offsets 5..9: transaction not committed",
        )
    ]
