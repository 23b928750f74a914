"""Kafka-side faults around the start of a run, on real brokers: a cluster that is down when ``run``
starts, internal topics that cannot get their replication factor, a second instance of a flow."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import _free_base_port
from kafka_helpers import (
    Rec,
    admin,
    create_topics,
    end_offsets,
    produce,
    read_partition,
    run_cli,
    unique,
    wait_for,
    write_config,
)
from sparkmirror.config import load_config
from sparkmirror.config.model import MirrorConfig
from sparkmirror.devcluster.cluster import DevClusters
from sparkmirror.errors import ConfigError
from sparkmirror.pipeline.driver.mirror import Mirror
from sparkmirror.pipeline.driver.startup import StartupTimeout
from sparkmirror.pipeline.exceptions import TopicRecreatedError


def test_internal_topics_get_their_replication_factor_or_the_run_refuses(bootstraps, spark, tmp_path: Path) -> None:
    # A source alias of its own: the flow's internal topics do not exist yet on this session's clusters.
    src = unique("rf").replace("-", "")
    cfg = tmp_path / "mm2.properties"
    cfg.write_text(
        f"clusters = {src}, B\n{src}.bootstrap.servers = {bootstraps['A']}\nB.bootstrap.servers = {bootstraps['B']}\n"
        f"{src}->B.enabled = true\n{src}->B.topics = {unique('rf')}\nemit.heartbeats.enabled = false\n"
        "offset-syncs.topic.replication.factor = 3\n"
    )
    with pytest.raises(ConfigError) as err:
        Mirror(load_config(cfg), once=True).run()
    text = str(err.value)
    assert text.startswith(
        f"offset-syncs.topic.replication.factor: internal topic sparkmirror-offset-map.{src}.internal"
    )
    assert "needs replication factor 3 but only 1 broker(s) are up" in text
    assert err.value.exit_code == 2


def test_a_cluster_down_at_start_is_waited_for_saying_so(
    bootstraps, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = _free_base_port()
    cfg = write_config(
        tmp_path / "mm2.properties", bootstraps["A"], f"127.0.0.1:{port + 10}",
        extra="sparkmirror.startup.timeout.ms = 4000\n",
    )  # fmt: skip
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="sparkmirror.pipeline.driver.startup"):
        with pytest.raises(StartupTimeout, match=rf"cluster B \(127.0.0.1:{port + 10}\) did not answer within"):
            Mirror(load_config(cfg), once=True).run()
    assert time.monotonic() - started < 30
    said = [r.getMessage() for r in caplog.records]
    assert any(f"waiting for cluster B (127.0.0.1:{port + 10}), needed by flow A->B (target)" in m for m in said)


def test_the_run_waits_for_a_target_that_comes_up_later_and_mirrors(
    bootstraps, spark, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    base = _free_base_port()
    topic = unique("late")
    create_topics(bootstraps["A"], {topic: 1})
    produce(bootstraps["A"], topic, 0, [Rec(b"k", f"{i}".encode(), (), int(time.time() * 1000)) for i in range(20)])
    cfg = write_config(
        tmp_path / "mm2.properties", bootstraps["A"], f"127.0.0.1:{base}",
        extra=f"A->B.topics = {topic}\n",
    )  # fmt: skip
    mirror = Mirror(load_config(cfg), once=True)
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(mirror.run()), daemon=True)
    late = DevClusters(tmp_path / "late")
    with caplog.at_level(logging.WARNING, logger="sparkmirror.pipeline.driver.startup"):
        thread.start()
        try:
            wait_for(
                lambda: any("waiting for cluster B" in r.getMessage() for r in caplog.records),
                timeout_s=60,
                what="the run to say it waits for B",
            )
            target = late.up(["B"], base_port=base)["B"]
            thread.join(240)
            assert not thread.is_alive(), "the run did not finish once B was up"
            assert result and end_offsets(target, f"A.{topic}") == {0: 20}
        finally:
            mirror.request_stop()
            thread.join(60)
            late.down()


def test_a_second_instance_of_a_flow_refuses_naming_the_first(bootstraps, spark, tmp_path: Path) -> None:
    topic = unique("lease")
    create_topics(bootstraps["A"], {topic: 1})
    cfg = write_config(
        tmp_path / "mm2.properties", bootstraps["A"], bootstraps["B"],
        extra=f"A->B.topics = {topic}\n",
    )  # fmt: skip
    first = Mirror(load_config(cfg))
    thread = threading.Thread(target=first.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: first.runners and first.runners[0].lease is not None, timeout_s=120, what="the first lease")
        started = time.monotonic()
        second = run_cli("run", str(cfg), "--once", timeout_s=120)
        assert time.monotonic() - started < 60
        assert second.returncode == 6, second.stdout + second.stderr[-3000:]
        assert f"host={socket.gethostname()} pid={os.getpid()} holds its lease" in second.stderr
        assert first.runners[0].failure is None and thread.is_alive()  # the first one runs on
    finally:
        first.request_stop()
        thread.join(120)


def _recreate(bootstrap: str, topic: str) -> None:
    client = admin(bootstrap)  # kept alive until the futures resolve
    for fut in client.delete_topics([topic], operation_timeout=30).values():
        fut.result()

    def created() -> bool:
        try:
            create_topics(bootstrap, {topic: 1})
        except Exception:  # noqa: BLE001 - the deletion is still under way
            return False
        return True

    wait_for(created, timeout_s=60, what=f"{topic} to be re-created")


def _old_topic(bootstraps: dict[str, str], tmp_path: Path, name: str, extra: str = "") -> tuple[str, int, MirrorConfig]:
    """A one-partition source topic holding ``old-0`` .. ``old-29``, its timestamp and a flow mirroring it."""
    topic = unique(name)
    create_topics(bootstraps["A"], {topic: 1})
    ts = int(time.time() * 1000)
    produce(bootstraps["A"], topic, 0, [Rec(b"k", f"old-{i}".encode(), (), ts) for i in range(30)])
    path = write_config(
        tmp_path / "mm2.properties", bootstraps["A"], bootstraps["B"], extra=f"A->B.topics = {topic}\n{extra}"
    )
    return topic, ts, load_config(path)


def test_a_recreated_source_topic_stops_the_flow_until_reset_topic(bootstraps, spark, tmp_path: Path) -> None:
    topic, ts, cfg = _old_topic(bootstraps, tmp_path, "recreated")
    Mirror(cfg, once=True).run()
    _recreate(bootstraps["A"], topic)
    produce(bootstraps["A"], topic, 0, [Rec(b"k", f"new-{i}".encode(), (), ts) for i in range(10)])

    with pytest.raises(TopicRecreatedError, match=f"source topic {topic} was deleted and re-created") as err:
        Mirror(cfg, once=True).run()
    assert err.value.exit_code == 7
    assert f"--reset-topic {topic}" in str(err.value)
    assert end_offsets(bootstraps["B"], f"A.{topic}") == {0: 30}  # nothing skipped, nothing copied

    assert Mirror(cfg, once=True, reset_topics=frozenset({topic})).run()[0].progress.records == 10
    assert Mirror(cfg, once=True).run()[0].progress.records == 0  # the new position is kept
    values = [r.value for r in read_partition(bootstraps["B"], f"A.{topic}", 0)]
    assert values == [f"old-{i}".encode() for i in range(30)] + [f"new-{i}".encode() for i in range(10)]


def _recreate_while_running(
    bootstraps: dict[str, str], topic: str, ts: int, cfg: MirrorConfig, before: Callable[[], None] = lambda: None
) -> BaseException:
    """Run the flow; once it mirrored the old records, ``before()``, then re-create the topic with more
    records than were mirrored of the old one (offsets 30.. exist on the new one too). Returns the error
    the run ended with, once B holds the old records only."""
    mirror = Mirror(cfg)
    ended: list[BaseException] = []

    def run() -> None:
        try:
            mirror.run()
        except BaseException as exc:  # noqa: BLE001 - the flow's error ends the run: kept for the asserts
            ended.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: end_offsets(bootstraps["B"], f"A.{topic}").get(0) == 30, timeout_s=120, what="the old records")
        before()
        _recreate(bootstraps["A"], topic)
        produce(bootstraps["A"], topic, 0, [Rec(b"k", f"new-{i}".encode(), (), ts) for i in range(100)])
        thread.join(120)
    finally:
        mirror.request_stop()
        thread.join(60)
    assert not thread.is_alive()
    assert len(ended) == 1, ended
    values = [r.value for r in read_partition(bootstraps["B"], f"A.{topic}", 0)]
    assert values == [f"old-{i}".encode() for i in range(30)], values[25:40]
    return ended[0]


def test_a_source_topic_recreated_while_the_flow_runs_is_never_copied_as_its_continuation(
    bootstraps, spark, tmp_path: Path
) -> None:
    """The new topic's records at offsets past what was mirrored of the old one are not appended as if
    they followed it: the running copy finds the new topic id and the flow stops (exit 7). Here the
    deletion fails the task's reads first and its retry's check finds the new id (the topic refresh's
    interval is longer than the test)."""
    topic, ts, cfg = _old_topic(bootstraps, tmp_path, "recreated-live", "refresh.topics.interval.seconds = 600\n")
    error = _recreate_while_running(bootstraps, topic, ts, cfg)
    assert isinstance(error, TopicRecreatedError) and error.exit_code == 7, error


def test_a_paused_source_topic_recreated_while_the_flow_runs_is_found_by_the_driver(
    bootstraps, spark, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A paused topic is not fetched, so its deletion fails no read: the driver's look at the flow's topic
    ids finds the new id while the copy runs, tells the tasks, and the flow stops (exit 7) without
    copying the new topic's records, before any resume."""
    topic, ts, cfg = _old_topic(bootstraps, tmp_path, "recreated-paused", "refresh.topics.interval.seconds = 600\n")

    def pause() -> None:
        done = run_cli("pause", str(tmp_path / "mm2.properties"), "--topics", topic)
        assert done.returncode == 0, done.stdout + done.stderr
        time.sleep(3)  # the tasks follow the pause at their next answer

    caplog.set_level(logging.INFO, logger="sparkmirror")
    error = _recreate_while_running(bootstraps, topic, ts, cfg, pause)
    assert isinstance(error, TopicRecreatedError) and error.exit_code == 7, error
    assert f"source topic {topic} deleted and re-created while the copy ran; its tasks stop copying it" in caplog.text
