"""Settings the session derives (Spark class names per version, the executors' Python), without starting Spark.

Spark 4.1 moved its streaming engine's classes into sub-packages; a checkpoint
file manager named in the old package fails every query at its start.
"""

from __future__ import annotations

import sys

import pytest

from sparkmirror.pipeline.session import checkpoint_file_manager, executor_python

_STREAMING = "org.apache.spark.sql.execution.streaming"


@pytest.mark.parametrize(
    ("version", "package"),
    [
        ("4.0.0", _STREAMING),
        ("4.0.5", _STREAMING),
        ("4.1.1", f"{_STREAMING}.checkpointing"),
        ("4.2.0", f"{_STREAMING}.checkpointing"),
        ("5.0.0.dev1", f"{_STREAMING}.checkpointing"),
    ],
)
def test_checkpoint_file_manager_follows_the_spark_version(version: str, package: str) -> None:
    assert checkpoint_file_manager(version) == f"{package}.FileSystemBasedCheckpointFileManager"


def test_executor_python_from_the_setting_wins_over_the_environment() -> None:
    # A packed venv shipped with spark.archives: its interpreter, relative to the executor's directory.
    settings = {"spark.pyspark.python": "./environment/bin/python"}
    assert executor_python(settings, {"PYSPARK_PYTHON": "/usr/bin/python3"}) == "./environment/bin/python"


def test_executor_python_defaults_to_pyspark_python_then_this_interpreter() -> None:
    assert executor_python({}, {"PYSPARK_PYTHON": "/opt/py/bin/python"}) == "/opt/py/bin/python"
    assert executor_python({}, {}) == sys.executable
