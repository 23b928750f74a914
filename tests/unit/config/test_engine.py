"""``sparkmirror.engine``: the streaming engine, the only one; the retired engines' keys are refused or
ignored with the reason."""

from __future__ import annotations

import logging
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


@pytest.mark.parametrize(
    ("extra", "interval"),
    [
        ("", 1000),
        ("sparkmirror.exactly.once = true\n", 200),
        ("exactly.once.source.support = enabled\n", 200),
        ("sparkmirror.exactly.once = true\nsparkmirror.commit.interval.ms = 1000\n", 1000),
        ("sparkmirror.commit.interval.ms = 200\n", 200),
    ],
)
def test_the_commit_interval_defaults_by_mode_unless_set(tmp_path: Path, extra: str, interval: int) -> None:
    """Each mode its own default (1 s at least once, 200 ms exactly once: docs/decisions.md, "The commit
    interval by mode"); set, it holds for both."""
    assert load_config(_file(tmp_path, extra)).flows[0].commit_interval_ms == interval


@pytest.mark.parametrize(
    ("line", "key", "reason"),
    [
        ("sparkmirror.engine = batch", "sparkmirror.engine", "the micro-batch engine was retired"),
        ("A->B.sparkmirror.engine = BATCH", "A->B.sparkmirror.engine", "the micro-batch engine was retired"),
        ("sparkmirror.source.reader = spark", "sparkmirror.source.reader", "retired micro-batch engine only"),
        ("A->B.sparkmirror.source.reader = spark", "A->B.sparkmirror.source.reader", "retired micro-batch engine"),
    ],
)
def test_the_retired_micro_batch_engine_is_refused_with_the_reason(
    tmp_path: Path, line: str, key: str, reason: str
) -> None:
    with pytest.raises(ConfigError, match=reason) as raised:
        _engine(tmp_path, line + "\n")
    assert raised.value.key == key and str(raised.value).startswith(key)
    assert "remove the key" in str(raised.value)


def test_what_the_streaming_engine_is_may_still_be_named(tmp_path: Path) -> None:
    assert _engine(tmp_path, "sparkmirror.engine = streaming\nsparkmirror.source.reader = direct\n") == "streaming"


def test_the_micro_batch_engines_tuning_keys_are_ignored_with_one_warning_each(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    keys = ["sparkmirror.trigger.interval.ms = 500", "A->B.sparkmirror.task.max.records = 9"]
    keys.append("sparkmirror.checkpoint.location = /var/lib/sparkmirror")
    with caplog.at_level(logging.WARNING, logger="sparkmirror.config"):
        assert _engine(tmp_path, "\n".join(keys) + "\n") == "streaming"
    said = [r.getMessage() for r in caplog.records if "micro-batch engine it tuned was retired" in r.getMessage()]
    assert len(said) == 3, said
    assert any(m.startswith("Ignoring A->B.sparkmirror.task.max.records:") for m in said), said
    assert any("progress on the target only" in m for m in said), said  # the checkpoint's reason


@pytest.mark.parametrize("line", ["sparkmirror.writer = jvm", "A->B.sparkmirror.writer = JVM"])
def test_the_retired_jvm_writer_is_refused_with_the_reason(tmp_path: Path, line: str) -> None:
    with pytest.raises(ConfigError, match="the JVM writer was retired") as raised:
        _engine(tmp_path, line + "\n")
    assert "sparkmirror.writer" in str(raised.value)
    assert _engine(tmp_path, "sparkmirror.writer = python\n") == "streaming"


def test_a_commit_interval_out_of_range_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="sparkmirror.commit.interval.ms"):
        _engine(tmp_path, "sparkmirror.commit.interval.ms = 1\n")


def _file(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "mm2.properties"
    path.write_text(BASE + extra)
    return path


def test_the_java_transport_is_chosen_per_flow(tmp_path: Path) -> None:
    assert load_config(_file(tmp_path, "")).flows[0].spark.transport == "librdkafka"
    assert load_config(_file(tmp_path, "A->B.sparkmirror.transport = java\n")).flows[0].spark.transport == "java"
    hybrid = load_config(_file(tmp_path, "sparkmirror.transport = java-writes\n")).flows[0].spark.transport
    assert hybrid == "java-writes"
    with pytest.raises(ConfigError, match="sparkmirror.transport"):
        load_config(_file(tmp_path, "sparkmirror.transport = kafka-python\n"))
