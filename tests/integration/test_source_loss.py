"""Records deleted on the source before they were mirrored are reported, never skipped silently.

Before the copy tasks start, each partition's start (from what the target holds) is compared with
the source's log start offset; a running task whose next offset the source no longer holds fails
its read (never a silent jump), and the restart reports the gap.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import TopicPartition

from kafka_helpers import (
    Rec,
    admin,
    create_topics,
    end_offsets,
    produce,
    read_partition,
    unique,
    wait_for,
    write_config,
)
from sparkmirror.cli.main import cli
from sparkmirror.config import load_config
from sparkmirror.pipeline.driver.mirror import Mirror
from sparkmirror.pipeline.exceptions import SourceLossError


def test_records_deleted_before_mirroring_are_reported(bootstraps, spark, tmp_path: Path, caplog):
    topic = unique("lost")
    create_topics(bootstraps["A"], {topic: 1})
    ts = int(time.time() * 1000)
    produce(bootstraps["A"], topic, 0, [Rec(b"k", f"{i}".encode(), (), ts) for i in range(100)])
    cfg = write_config(
        tmp_path / "mm2.properties",
        bootstraps["A"],
        bootstraps["B"],
        extra=f"A->B.topics = {topic}\n",
    )
    mirror = Mirror(load_config(cfg))
    thread = threading.Thread(target=mirror.run, daemon=True)
    with caplog.at_level(logging.ERROR, logger="sparkmirror.pipeline.driver"):
        thread.start()
        try:
            wait_for(
                lambda: end_offsets(bootstraps["B"], f"A.{topic}").get(0) == 100,
                timeout_s=120,
                what="the first records",
                interval_s=0.3,
            )
            # Paused (flow control), the running tasks read nothing while records arrive and expire.
            paused = CliRunner().invoke(cli, ["pause", str(cfg)], catch_exceptions=False)
            assert paused.exit_code == 0, paused.output
            runner = mirror.runners[0]
            wait_for(lambda: runner.throttle.in_effect[0].paused, timeout_s=30, what="every task to pause")
            produce(bootstraps["A"], topic, 0, [Rec(b"k", f"{i}".encode(), (), ts) for i in range(100, 200)])
            _delete_records(bootstraps["A"], topic, 150)
            resumed = CliRunner().invoke(cli, ["resume", str(cfg)], catch_exceptions=False)
            assert resumed.exit_code == 0, resumed.output
            wait_for(
                lambda: end_offsets(bootstraps["B"], f"A.{topic}").get(0) == 150,
                timeout_s=120,
                what="the records that survived",
            )
            wait_for(lambda: runner.progress.lost_on_source == 50, timeout_s=10, what="the loss to be counted")
        finally:
            mirror.request_stop()
            thread.join(120)
    assert any(f"{topic}[0] offsets 100..149 were deleted on the source" in r.getMessage() for r in caplog.records)


def _delete_records(bootstrap: str, topic: str, before: int) -> None:
    client = admin(bootstrap)  # kept alive until the futures resolve
    for fut in client.delete_records([TopicPartition(topic, 0, before)]).values():
        fut.result()


def _values(bootstrap: str, topic: str) -> list[bytes]:
    return [r.value or b"" for r in read_partition(bootstrap, topic, 0)]


def test_loss_while_the_mirror_was_down_is_found_after_the_restart_and_run_once_exits_5(
    bootstraps, spark, tmp_path: Path
) -> None:
    """The first start after a restart is checked too: where the partition stopped comes from the
    target, not from memory."""
    topic = unique("lost-restart")
    create_topics(bootstraps["A"], {topic: 1})
    ts = int(time.time() * 1000)
    produce(bootstraps["A"], topic, 0, [Rec(b"k", f"{i}".encode(), (), ts) for i in range(100)])
    cfg = write_config(
        tmp_path / "mm2.properties", bootstraps["A"], bootstraps["B"],
        extra=f"A->B.topics = {topic}\n",
    )  # fmt: skip
    assert Mirror(load_config(cfg), once=True).run()[0].progress.lost_on_source == 0
    # While the mirror is down, 100 more records arrive and the first 50 of them expire.
    produce(bootstraps["A"], topic, 0, [Rec(b"k", f"{i}".encode(), (), ts) for i in range(100, 200)])
    _delete_records(bootstraps["A"], topic, 150)

    result = CliRunner().invoke(cli, ["run", str(cfg), "--once"], catch_exceptions=False)
    assert result.exit_code == 5, result.output
    assert f"{topic}[0] offsets 100..149 (50)" in result.output  # the run's summary
    assert "50 records expired on the source before they were mirrored" in result.output
    assert _values(bootstraps["B"], f"A.{topic}") == [f"{i}".encode() for i in [*range(100), *range(150, 200)]]


def test_source_loss_fail_stops_the_flow_before_copying_past_the_gap(bootstraps, spark, tmp_path: Path) -> None:
    topic = unique("lost-fail")
    create_topics(bootstraps["A"], {topic: 1})
    ts = int(time.time() * 1000)
    produce(bootstraps["A"], topic, 0, [Rec(b"k", f"{i}".encode(), (), ts) for i in range(100)])
    cfg = write_config(
        tmp_path / "mm2.properties", bootstraps["A"], bootstraps["B"],
        extra=f"A->B.topics = {topic}\nsparkmirror.source.loss = fail\n",
    )  # fmt: skip
    Mirror(load_config(cfg), once=True).run()
    produce(bootstraps["A"], topic, 0, [Rec(b"k", f"{i}".encode(), (), ts) for i in range(100, 200)])
    _delete_records(bootstraps["A"], topic, 130)

    with pytest.raises(SourceLossError, match=rf"{topic}\[0\] offsets 100..129 \(30\)") as err:
        Mirror(load_config(cfg), once=True).run()
    assert err.value.exit_code == 5
    assert "sparkmirror.source.loss = report" in str(err.value)  # how to go on
    assert end_offsets(bootstraps["B"], f"A.{topic}")[0] == 100  # nothing past the gap

    # The documented way on: report it, carry on; the gap is reported again, then mirrored past.
    reported = write_config(
        tmp_path / "mm2.properties", bootstraps["A"], bootstraps["B"],
        extra=f"A->B.topics = {topic}\n",
    )  # fmt: skip
    assert Mirror(load_config(reported), once=True).run()[0].progress.lost_on_source == 30
    assert end_offsets(bootstraps["B"], f"A.{topic}")[0] == 170
