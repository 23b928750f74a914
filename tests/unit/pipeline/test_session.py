"""Spark class names the session sets, per Spark version, without starting Spark.

Spark 4.1 moved its streaming engine's classes into sub-packages; a checkpoint
file manager named in the old package fails every query at its start.
"""

from __future__ import annotations

import pytest

from sparkmirror.pipeline.session import checkpoint_file_manager

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
