"""Checkpoints across restarts, group offset sync, heartbeats.

- checkpoint_never_moves_backwards_across_restarts: a restarted job reads the
  previous checkpoints back before emitting; a source group that rewinds is
  followed (its checkpoint moves back), a stale translation is not.
- group offset sync commits translated offsets only to groups that are empty
  or absent on the target, skips a group with active members (saying so), and
  never moves a target offset backwards.
- heartbeats in MM2's layout reach B as A.heartbeats.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from kafka_helpers import commit_group, create_topics, unique, wait_for, write_config
from sparkmirror.config import load_config
from sparkmirror.core.formats import Checkpoint, Heartbeat
from sparkmirror.kafka.groups import commit_offsets, committed_offsets
from sparkmirror.kafka.internal import read_to_end
from sparkmirror.pipeline.driver.mirror import Mirror


def _produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
    p.flush(30)


def _all_checkpoints(bootstrap: str, group: str) -> list[Checkpoint]:
    return [
        cp
        for k, v in read_to_end({"bootstrap.servers": bootstrap}, "A.checkpoints.internal")
        if k is not None and v is not None
        for cp in [Checkpoint.decode(k, v)]
        if cp.group == group
    ]


def test_checkpoint_never_moves_backwards_across_restarts(bootstraps, spark, tmp_path: Path) -> None:
    topic = unique("cp-mono")
    create_topics(bootstraps["A"], {topic: 1})
    _produce(bootstraps["A"], topic, 300)
    group = unique("g")
    cfg = write_config(
        tmp_path / "mm2.properties",
        bootstraps["A"],
        bootstraps["B"],
        extra=f"A->B.topics = {topic}\n",
    )
    commit_group(bootstraps["A"], group, {(topic, 0): 200})
    Mirror(load_config(cfg), once=True).run()
    # A restart with the group unchanged emits nothing new (state read back).
    Mirror(load_config(cfg), once=True).run()
    assert [(c.upstream_offset, c.downstream_offset) for c in _all_checkpoints(bootstraps["B"], group)] == [(200, 200)]
    # The group rewinds on A: the checkpoint follows it back.
    commit_group(bootstraps["A"], group, {(topic, 0): 50})
    Mirror(load_config(cfg), once=True).run()
    assert [(c.upstream_offset, c.downstream_offset) for c in _all_checkpoints(bootstraps["B"], group)][-1] == (50, 50)


def test_checkpoint_carries_the_groups_commit_metadata(bootstraps, spark, tmp_path: Path) -> None:
    topic = unique("cp-meta")
    create_topics(bootstraps["A"], {topic: 1})
    _produce(bootstraps["A"], topic, 20)
    group = unique("g")
    c = Consumer({"bootstrap.servers": bootstraps["A"], "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 7, "app-state-42")], asynchronous=False)
    c.close()
    commit_group(bootstraps["A"], group, {(topic, 0): 7})
    cfg = write_config(
        tmp_path / "mm2.properties",
        bootstraps["A"],
        bootstraps["B"],
        extra=f"A->B.topics = {topic}\n",
    )
    c = Consumer({"bootstrap.servers": bootstraps["A"], "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 7, "app-state-42")], asynchronous=False)
    c.close()
    Mirror(load_config(cfg), once=True).run()
    (cp,) = _all_checkpoints(bootstraps["B"], group)
    assert (cp.upstream_offset, cp.downstream_offset, cp.metadata) == (7, 7, "app-state-42")


def test_group_offset_sync_skips_active_groups_and_never_rewinds(bootstraps, spark, tmp_path: Path, caplog) -> None:
    topic = unique("sync")
    create_topics(bootstraps["A"], {topic: 1})
    _produce(bootstraps["A"], topic, 100)
    empty, ahead, active = unique("g-empty"), unique("g-ahead"), unique("g-active")
    for g in (empty, ahead, active):
        commit_group(bootstraps["A"], g, {(topic, 0): 60})
    remote = f"A.{topic}"
    create_topics(bootstraps["B"], {remote: 1})
    _produce(bootstraps["B"], remote, 0)
    # On B: one group is already further than the translation; one has a live member.
    commit_offsets({"bootstrap.servers": bootstraps["B"]}, ahead, {(remote, 0): 90})
    member = Consumer({"bootstrap.servers": bootstraps["B"], "group.id": active, "auto.offset.reset": "earliest"})
    member.subscribe([remote])
    deadline = time.monotonic() + 60
    while not member.assignment() and time.monotonic() < deadline:
        member.poll(0.5)
    assert member.assignment(), "the active member did not join"
    try:
        cfg = write_config(
            tmp_path / "mm2.properties",
            bootstraps["A"],
            bootstraps["B"],
            extra=f"A->B.topics = {topic}\nsync.group.offsets.enabled = true\nsync.group.offsets.interval.seconds = 1\n"
            "emit.checkpoints.interval.seconds = 1\n",
        )
        mirror = Mirror(load_config(cfg))
        import threading

        thread = threading.Thread(target=mirror.run, daemon=True)
        with caplog.at_level(logging.INFO, logger="sparkmirror.checkpoints.emitter"):
            thread.start()
            try:
                b = {"bootstrap.servers": bootstraps["B"]}
                wait_for(
                    lambda: committed_offsets(b, empty, [(remote, 0)]) == {(remote, 0): 60},
                    timeout_s=120,
                    what="the empty group to be synced",
                )
                time.sleep(3)  # a few more sync rounds
                assert committed_offsets(b, ahead, [(remote, 0)]) == {(remote, 0): 90}, "target offset rewound"
                assert committed_offsets(b, active, [(remote, 0)]) == {}, "active group was synced"
            finally:
                mirror.request_stop()
                thread.join(120)
        assert any(f"group {active} has 1 active members" in r.getMessage() for r in caplog.records)
    finally:
        member.close()


def test_heartbeats_reach_the_target_as_remote_heartbeats(bootstraps, spark, tmp_path: Path) -> None:
    cfg = write_config(
        tmp_path / "mm2.properties",
        bootstraps["A"],
        bootstraps["B"],
        extra="A->B.topics = heartbeats\nemit.heartbeats.enabled = true\nheartbeats.replication.enabled = true\n",
    )
    Mirror(load_config(cfg), once=True).run()  # creates `heartbeats` on both sides and beats once
    Mirror(load_config(cfg), once=True).run()  # mirrors what A's heartbeats topic holds by now
    on_b = [Heartbeat.decode(k, v) for k, v in read_to_end({"bootstrap.servers": bootstraps["B"]}, "heartbeats")]
    assert any((h.source_cluster_alias, h.target_cluster_alias) == ("A", "B") for h in on_b)
    remote = [Heartbeat.decode(k, v) for k, v in read_to_end({"bootstrap.servers": bootstraps["B"]}, "A.heartbeats")]
    assert remote and all((h.source_cluster_alias, h.target_cluster_alias) == ("B", "A") for h in remote)
    assert max(h.timestamp for h in remote) > (time.time() - 600) * 1000
