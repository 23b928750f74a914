"""What a failed micro-batch hands to Spark: a short error, never the Py4J dump of a failed job
(Spark's stop handling overflowed its stack on those; tests/integration/test_batch_error_size.py)."""

from __future__ import annotations

import threading
import traceback
from types import SimpleNamespace

from sparkmirror.pipeline.driver.batch import MAX_ERROR_CHARS, BatchFailed, BatchHandler, StopRequested, summary
from sparkmirror.pipeline.exceptions import TERMINAL_MARKER

#: Spark's stop check recurses per character after this (StreamExecution.isInterruptionException).
SPARK_PATTERN_PREFIX = "py4j.protocol.Py4JJavaError: An error occurred while calling"


def _job_failure(inner: str) -> str:
    """The text of a Py4JJavaError for a Spark job whose task failed 4 times (tens of kilobytes)."""
    frames = "\n".join(f"\tat org.apache.spark.scheduler.DAGScheduler.f{i}(DAGScheduler.scala:{i})" for i in range(400))
    return (
        "An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed 4 times, "
        "most recent failure: Lost task 0.3 in stage 3.0 (TID 12): org.apache.spark.api.python.PythonException: "
        'Traceback (most recent call last):\n  File "/x/tasks.py", line 10, in copy\n'
        f"{inner}\n{frames}\nDriver stacktrace:\n{frames}"
    )


class Py4JJavaError(Exception):
    """Stands in for py4j's (same name, a long str)."""


def _handler(stop: bool = False) -> BatchHandler:
    handler = BatchHandler.__new__(BatchHandler)
    handler.flow = SimpleNamespace(name="A->B")  # type: ignore[assignment]
    handler.stop = threading.Event()
    if stop:
        handler.stop.set()
    handler._failure = None
    return handler


def _as_spark_sees_it(error: BaseException) -> str:
    """py4j's callback server sends the Python traceback to the JVM (``traceback.format_exc``)."""
    try:
        try:
            raise Py4JJavaError(_job_failure("sparkmirror.pipeline.exceptions.WriteError: boom"))
        except Py4JJavaError:
            raise error from None
    except BaseException:  # noqa: BLE001
        return traceback.format_exc()


def test_a_failed_job_reaches_spark_as_a_short_error_and_the_whole_text_is_kept() -> None:
    handler = _handler()
    inner = "sparkmirror.pipeline.exceptions.WriteError: flow=A->B t[0] offsets 5..9: transaction not committed"
    error = handler._failed(7, Py4JJavaError(_job_failure(inner)))
    assert isinstance(error, BatchFailed)
    assert str(error) == f"flow=A->B batch 7 failed: {inner}"
    seen = _as_spark_sees_it(error)
    assert SPARK_PATTERN_PREFIX not in seen and len(seen) < 2000, len(seen)
    kept = handler.take_failure()
    assert kept is not None and inner in kept and "Driver stacktrace" in kept
    assert handler.take_failure() is None  # once


def test_a_terminal_error_keeps_its_marker_in_the_short_form() -> None:
    handler = _handler()
    inner = f"sparkmirror.pipeline.exceptions.WriteError: {TERMINAL_MARKER} flow=A->B t[0] offset=3: too large"
    error = handler._failed(2, Py4JJavaError(_job_failure(inner)))
    assert f"{TERMINAL_MARKER} flow=A->B t[0] offset=3: too large" in str(error)
    assert len(str(error)) <= MAX_ERROR_CHARS + 40


def test_a_job_interrupted_by_a_stop_is_an_abandoned_batch() -> None:
    handler = _handler(stop=True)
    error = handler._failed(4, Py4JJavaError(_job_failure("java.lang.InterruptedException")))
    assert isinstance(error, StopRequested)
    assert handler.take_failure() is None


def test_summary_names_the_error_not_the_wrappers() -> None:
    assert summary("KafkaException: KafkaError{code=_TIMED_OUT,val=-185}") == (
        "KafkaException: KafkaError{code=_TIMED_OUT,val=-185}"
    )
    long = summary("An error occurred while calling o1.x.\n: java.lang.IllegalStateException: " + "y" * 5000)
    assert long.startswith("java.lang.IllegalStateException: y") and len(long) == MAX_ERROR_CHARS
    assert SPARK_PATTERN_PREFIX not in summary(SPARK_PATTERN_PREFIX + " o1.collect")


def test_summary_of_a_failed_jvm_task_is_the_tasks_own_error() -> None:
    text = (
        "An error occurred while calling z:sparkmirror.jvm.RangeCopier.copy.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed 4 times, "
        "most recent failure: Lost task 0.3 in stage 3.0 (TID 9) (127.0.0.1 executor driver): "
        "java.lang.IllegalStateException: flow=A->B t[0] offset=7: delivery to A.t[0] failed (x); replayed\n"
        "\tat sparkmirror.jvm.RangeCopier$Copy.run(RangeCopier.java:1)\n"
    )
    assert (
        summary(text)
        == "java.lang.IllegalStateException: flow=A->B t[0] offset=7: delivery to A.t[0] failed (x); replayed"
    )
    python = (
        ": org.apache.spark.SparkException: Job aborted due to stage failure: most recent failure: Lost task 0.3 "
        "(executor driver): org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
        "sparkmirror.pipeline.exceptions.WriteError: flow=A->B t[0] offset=3: x\n"
    )
    assert summary(python) == "sparkmirror.pipeline.exceptions.WriteError: flow=A->B t[0] offset=3: x"


def test_a_job_cancelled_by_a_stop_and_a_stop_between_rounds_are_abandoned_batches() -> None:
    handler = _handler(stop=True)
    cancelled = "org.apache.spark.SparkException: [SPARK_JOB_CANCELLED] Job 12 cancelled part of cancelled job group x"
    assert isinstance(handler._failed(5, Py4JJavaError(_job_failure(cancelled))), StopRequested)
    own = StopRequested("flow=A->B: batch abandoned after 2 of 9 rounds: stop requested")
    assert handler._failed(5, own) is own  # passed through as it is, not made a failed batch
    assert handler.take_failure() is None
    # Without a stop, a cancelled job is a failed batch like any other.
    assert isinstance(_handler()._failed(5, Py4JJavaError(_job_failure(cancelled))), BatchFailed)
