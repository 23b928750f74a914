"""Spark's own stop check on the error a failed micro-batch hands it (real Spark, no Kafka).

When a query is stopped, Spark matches the foreachBatch error's text with a regular expression that
recurses once per character after ``Py4JJavaError: An error occurred while calling``
(``StreamExecution.isInterruptionException``). The Py4J dump of a failed Spark job (kilobytes)
overflowed the stream thread's stack: the thread died with ``java.lang.StackOverflowError`` and no
recorded error. The batch handler hands Spark a short error instead (``pipeline/driver/batch.py``).
"""

from __future__ import annotations

import threading
import traceback
from types import SimpleNamespace
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError

from sparkmirror.pipeline.driver.batch import BatchHandler


def _is_interruption(spark: Any, message: str) -> Any:
    jvm = spark.sparkContext._jvm
    package = jvm.org.apache.spark.sql.execution.streaming
    owner = getattr(package.runtime, "StreamExecution$", None) or getattr(package, "StreamExecution$")
    module = getattr(owner, "MODULE$")
    return module.isInterruptionException(jvm.py4j.Py4JException(message), spark.sparkContext._jsc.sc())


def _dump(lines: int) -> str:
    frames = "".join(
        f"\tat org.apache.spark.scheduler.DAGScheduler.f{i}(DAGScheduler.scala:{i})\n" for i in range(lines)
    )
    return (
        "An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):\n"
        "py4j.protocol.Py4JJavaError: An error occurred while calling o1.collectAndServe.\n"
        f": org.apache.spark.SparkException: Job aborted due to stage failure\n{frames}"
    )


def test_spark_overflows_on_a_long_py4j_dump_and_not_on_the_handlers_error(spark: Any) -> None:
    # The fault itself, so that this test notices if a Spark upgrade fixes or moves it.
    with pytest.raises(Py4JJavaError, match="StackOverflowError"):
        _is_interruption(spark, _dump(400))
    handler = BatchHandler.__new__(BatchHandler)
    handler.flow = SimpleNamespace(name="A->B")  # type: ignore[assignment]
    handler.stop = threading.Event()
    handler._failure = None

    class Dump(Exception):
        def __str__(self) -> str:
            return _dump(400)

    error = handler._failed(3, Dump())
    try:
        raise error from None
    except Exception:  # noqa: BLE001 - formatted as py4j's callback server does
        sent = "An exception was raised by the Python Proxy. Return Message: " + traceback.format_exc()
    assert _is_interruption(spark, sent) is False
