"""The one line a failed copy job is said in: the task's own error, never the Py4J dump of a failed
Spark job (tens of kilobytes; the whole text goes to the debug log)."""

from __future__ import annotations

from sparkmirror.pipeline.driver.supervisor import MAX_ERROR_CHARS, summary
from sparkmirror.pipeline.exceptions import TERMINAL_MARKER

SPARK_PATTERN_PREFIX = "py4j.protocol.Py4JJavaError: An error occurred while calling"


def _job_failure(inner: str) -> str:
    """The text of a Py4JJavaError for a Spark job whose task failed 4 times (tens of kilobytes)."""
    frames = "\n".join(f"\tat org.apache.spark.scheduler.DAGScheduler.f{i}(DAGScheduler.scala:{i})" for i in range(400))
    return (
        "An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed 4 times, "
        "most recent failure: Lost task 0.3 in stage 3.0 (TID 12): org.apache.spark.api.python.PythonException: "
        'Traceback (most recent call last):\n  File "/x/stream.py", line 10, in copy\n'
        f"{inner}\n{frames}\nDriver stacktrace:\n{frames}"
    )


def test_a_failed_job_is_said_in_its_tasks_error() -> None:
    inner = "sparkmirror.pipeline.exceptions.WriteError: flow=A->B t[0] offsets 5..9: transaction not committed"
    assert summary(_job_failure(inner)) == inner


def test_a_terminal_error_keeps_its_marker() -> None:
    inner = f"sparkmirror.pipeline.exceptions.WriteError: {TERMINAL_MARKER} flow=A->B t[0] offset=3: too large"
    line = summary(_job_failure(inner))
    assert line.startswith(f"{TERMINAL_MARKER} flow=A->B t[0] offset=3: too large")
    assert len(line) <= MAX_ERROR_CHARS


def test_summary_names_the_error_not_the_wrappers() -> None:
    assert summary("KafkaException: KafkaError{code=_TIMED_OUT,val=-185}") == (
        "KafkaException: KafkaError{code=_TIMED_OUT,val=-185}"
    )
    long = summary("An error occurred while calling o1.x.\n: java.lang.IllegalStateException: " + "y" * 5000)
    assert long.startswith("java.lang.IllegalStateException: y") and len(long) == MAX_ERROR_CHARS
    assert SPARK_PATTERN_PREFIX not in summary(SPARK_PATTERN_PREFIX + " o1.collect")


def test_summary_of_a_failed_jvm_task_is_the_tasks_own_error() -> None:
    text = (
        "An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed 4 times, "
        "most recent failure: Lost task 0.3 in stage 3.0 (TID 9) (127.0.0.1 executor driver): "
        "java.lang.IllegalStateException: flow=A->B t[0] offset=7: delivery to A.t[0] failed (x); replayed\n"
        "\tat org.apache.spark.scheduler.Task.run(Task.scala:1)\n"
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
