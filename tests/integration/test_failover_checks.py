"""`sparkmirror failover` refuses what is unsafe, on real clusters: an active group on the target
(exit 3, naming its members), replication that has not caught up (exit 4, with the missing records
per partition, unless --force), and it never rewinds an offset already ahead on the target."""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import Consumer, Producer

from kafka_helpers import commit_group, create_topics, run_cli, unique, wait_for, write_config
from sparkmirror.config import load_config
from sparkmirror.kafka.groups import commit_offsets, committed_offsets
from sparkmirror.pipeline.driver.mirror import Mirror


def _produce(bootstrap: str, topic: str, n: int, partitions: int = 2) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(n):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % partitions)
    assert p.flush(30) == 0


def _mirrored(bootstraps, tmp_path: Path) -> tuple[str, str, Path]:
    """A fresh topic with 1,000 records mirrored to B, and a group at (100, 200) on A."""
    topic, group = unique("fo"), unique("fo-group")
    create_topics(bootstraps["A"], {topic: 2})
    _produce(bootstraps["A"], topic, 1000)
    commit_group(bootstraps["A"], group, {(topic, 0): 100, (topic, 1): 200})
    cfg = write_config(
        tmp_path / "mm2.properties",
        bootstraps["A"],
        bootstraps["B"],
        extra=f"A->B.topics = {topic}\n",
    )
    Mirror(load_config(cfg), once=True).run()
    return topic, group, cfg


def _failover(cfg: Path, group: str, *extra: str):
    return run_cli(
        "failover", str(cfg), "--source", "A", "--target", "B", "--groups", re.escape(group), *extra, timeout_s=300
    )


@contextlib.contextmanager
def _member(bootstrap: str, group: str, topic: str, client_id: str) -> Iterator[None]:
    """A consumer that has joined ``group`` (subscribed to ``topic``) until the block ends."""
    assigned = threading.Event()
    stop = threading.Event()

    def run() -> None:
        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": client_id,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        c.subscribe([topic], on_assign=lambda _c, _parts: assigned.set())
        while not stop.is_set():
            c.poll(0.2)
        c.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        wait_for(assigned.is_set, timeout_s=60, what=f"a consumer to join {group}", interval_s=0.2)
        yield
    finally:
        stop.set()
        t.join(30)


def test_active_group_on_target_is_refused_naming_members(bootstraps, spark, tmp_path: Path) -> None:
    topic, group, cfg = _mirrored(bootstraps, tmp_path)
    client_id = unique("still-running")
    with _member(bootstraps["B"], group, f"A.{topic}", client_id):
        result = _failover(cfg, group, "--execute")
        assert result.returncode == 3, result.stdout + result.stderr
        assert f"group {group}" in result.stderr and client_id in result.stderr
        assert "Stop these consumers" in result.stderr
    assert committed_offsets({"bootstrap.servers": bootstraps["B"]}, group, [(f"A.{topic}", 0)]) == {}

    # The members left: the same command now commits the exact positions.
    wait_for(lambda: _failover(cfg, group).returncode == 0, timeout_s=60, what="the group on B to be empty")
    result = _failover(cfg, group, "--execute", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["executed"] == 2
    got = committed_offsets({"bootstrap.servers": bootstraps["B"]}, group, [(f"A.{topic}", 0), (f"A.{topic}", 1)])
    assert got == {(f"A.{topic}", 0): 100, (f"A.{topic}", 1): 200}


def test_not_caught_up_is_refused_with_missing_records_unless_forced(bootstraps, spark, tmp_path: Path) -> None:
    topic, group, cfg = _mirrored(bootstraps, tmp_path)
    _produce(bootstraps["A"], topic, 301)  # not mirrored: 151 in partition 0, 150 in partition 1
    result = _failover(cfg, group, "--json")
    assert result.returncode == 4, result.stdout + result.stderr
    assert "has not caught up: 301 records would be missing on B" in result.stderr
    assert f"{topic}[0]: 151" in result.stderr and f"{topic}[1]: 150" in result.stderr
    report = json.loads(result.stdout)  # the plan is still printed
    assert report["lag"] == {f"{topic}[0]": 151, f"{topic}[1]": 150}
    assert [r["exit_code"] for r in report["refusals"]] == [4]
    assert {m["missing"] for m in report["moves"]} == {151, 150}

    refused = _failover(cfg, group, "--execute")
    assert refused.returncode == 4
    assert committed_offsets({"bootstrap.servers": bootstraps["B"]}, group, [(f"A.{topic}", 0)]) == {}

    forced = _failover(cfg, group, "--execute", "--force")
    assert forced.returncode == 0, forced.stderr
    assert "records not on B: 301" in forced.stdout and "auto.offset.reset" in forced.stdout

    # Caught up again: no refusal.
    Mirror(load_config(cfg), once=True).run()
    assert _failover(cfg, group).returncode == 0


def test_never_rewinds_an_offset_ahead_on_the_target_unless_forced(bootstraps, spark, tmp_path: Path) -> None:
    topic, group, cfg = _mirrored(bootstraps, tmp_path)
    b = {"bootstrap.servers": bootstraps["B"]}
    commit_offsets(b, group, {(f"A.{topic}", 0): 400})  # consumers on B got further already
    result = _failover(cfg, group, "--execute", "--json")
    assert result.returncode == 0, result.stderr
    actions = {m["partition"]: m["action"] for m in json.loads(result.stdout)["moves"]}
    assert actions == {0: "keep", 1: "commit"}
    assert committed_offsets(b, group, [(f"A.{topic}", 0), (f"A.{topic}", 1)]) == {
        (f"A.{topic}", 0): 400,
        (f"A.{topic}", 1): 200,
    }
    time.sleep(0.1)
    forced = _failover(cfg, group, "--execute", "--force", "--json")
    assert forced.returncode == 0, forced.stderr
    assert {m["partition"]: m["action"] for m in json.loads(forced.stdout)["moves"]} == {0: "rewind", 1: "unchanged"}
    assert committed_offsets(b, group, [(f"A.{topic}", 0)]) == {(f"A.{topic}", 0): 100}


def test_a_group_still_active_on_the_source_is_noted(bootstraps, spark, tmp_path: Path) -> None:
    topic, group, cfg = _mirrored(bootstraps, tmp_path)
    with _member(bootstraps["A"], group, topic, unique("on-a")):
        result = _failover(cfg, group, "--json")
    assert result.returncode == 0, result.stderr
    notes = json.loads(result.stdout)["notes"]
    assert any(f"group {group} still has 1 active members on A" in n for n in notes), notes
