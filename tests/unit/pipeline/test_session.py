"""Settings the session derives (the executors' Python), without starting Spark."""

from __future__ import annotations

import sys
from pathlib import Path

from sparkmirror.pipeline.session import JVM_OPTIONS, executor_python, java_options


def test_executor_python_from_the_setting_wins_over_the_environment() -> None:
    # A packed venv shipped with spark.archives: its interpreter, relative to the executor's directory.
    settings = {"spark.pyspark.python": "./environment/bin/python"}
    assert executor_python(settings, {"PYSPARK_PYTHON": "/usr/bin/python3"}) == "./environment/bin/python"


def test_executor_python_defaults_to_pyspark_python_then_this_interpreter() -> None:
    assert executor_python({}, {"PYSPARK_PYTHON": "/opt/py/bin/python"}) == "/opt/py/bin/python"
    assert executor_python({}, {}) == sys.executable


def test_the_driver_jvm_gets_the_idle_options_ahead_of_the_operators_own() -> None:
    """Spark's driver JVM carries no records: C1 only, no perf-data sampling, unless the operator's
    options (later on the line: HotSpot takes the last) say otherwise; no collector (HotSpot refuses
    two, and an operator's or the cluster's may name one); the executors' options are the cluster's;
    the driver's log4j2 file unless the operator names one."""
    out = java_options({"spark.driver.extraJavaOptions": "-XX:+UseG1GC -XX:+UsePerfData"}, Path("/x/l.properties"))
    assert out == {
        "spark.driver.extraJavaOptions": f"{JVM_OPTIONS} -XX:+UseG1GC -XX:+UsePerfData "
        "-Dlog4j2.configurationFile=file:/x/l.properties"
    }
    assert "GC" not in JVM_OPTIONS
    own = java_options({"spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile=file:/mine"}, Path("/x"))
    assert own["spark.driver.extraJavaOptions"] == f"{JVM_OPTIONS} -Dlog4j2.configurationFile=file:/mine"
