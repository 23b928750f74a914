"""Settings the session derives (the executors' Python), without starting Spark."""

from __future__ import annotations

import sys

from sparkmirror.pipeline.session import executor_python


def test_executor_python_from_the_setting_wins_over_the_environment() -> None:
    # A packed venv shipped with spark.archives: its interpreter, relative to the executor's directory.
    settings = {"spark.pyspark.python": "./environment/bin/python"}
    assert executor_python(settings, {"PYSPARK_PYTHON": "/usr/bin/python3"}) == "./environment/bin/python"


def test_executor_python_defaults_to_pyspark_python_then_this_interpreter() -> None:
    assert executor_python({}, {"PYSPARK_PYTHON": "/opt/py/bin/python"}) == "/opt/py/bin/python"
    assert executor_python({}, {}) == sys.executable
