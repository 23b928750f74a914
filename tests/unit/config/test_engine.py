"""``sparkmirror.engine``: streaming by default; micro-batches for what only they run."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkmirror.config import load_config
from sparkmirror.errors import ConfigError

BASE = """\
clusters = A, B
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
A->B.enabled = true
"""


def _engine(tmp_path: Path, extra: str) -> str:
    path = tmp_path / "mm2.properties"
    path.write_text(BASE + extra)
    return load_config(path).flows[0].spark.engine


def test_the_streaming_engine_is_the_default(tmp_path: Path) -> None:
    assert _engine(tmp_path, "") == "streaming"
    assert load_config(_file(tmp_path, "")).flows[0].spark.commit_interval_ms == 200


def test_sparks_reader_keeps_micro_batches_unless_told(tmp_path: Path) -> None:
    line = "sparkmirror.source.reader = spark"
    assert _engine(tmp_path, line + "\n") == "batch"
    assert _engine(tmp_path, f"A->B.{line}\n") == "batch"  # per flow too
    with pytest.raises(ConfigError, match="sparkmirror.engine = streaming reads with the direct reader"):
        _engine(tmp_path, f"{line}\nsparkmirror.engine = streaming\n")


@pytest.mark.parametrize("line", ["sparkmirror.writer = jvm", "A->B.sparkmirror.writer = JVM"])
def test_the_retired_jvm_writer_is_refused_with_the_reason(tmp_path: Path, line: str) -> None:
    with pytest.raises(ConfigError, match="the JVM writer was retired") as raised:
        _engine(tmp_path, line + "\n")
    assert "sparkmirror.writer" in str(raised.value)
    assert _engine(tmp_path, "sparkmirror.writer = python\n") == "streaming"


def test_batch_is_chosen_by_name(tmp_path: Path) -> None:
    assert _engine(tmp_path, "sparkmirror.engine = batch\n") == "batch"
    assert _engine(tmp_path, "A->B.sparkmirror.engine = batch\n") == "batch"


def test_a_commit_interval_out_of_range_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="sparkmirror.commit.interval.ms"):
        _engine(tmp_path, "sparkmirror.commit.interval.ms = 1\n")


def _file(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "mm2.properties"
    path.write_text(BASE + extra)
    return path
