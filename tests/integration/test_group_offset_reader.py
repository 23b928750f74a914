"""Reading many groups' offsets at once (kafka/groupreader.py), on real brokers.

- the reader answers what a consumer per group answers: offsets, commit
  metadata, nothing for a group without commits;
- group_offsets_survive_the_reader_crashing: when the child process dies
  mid-read (the librdkafka admin crash, here forced by the test hook), the
  groups it did not answer come back as failed, never as "no offsets", the
  emitter reads them through consumers, and the next read starts a new child.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from kafka_helpers import commit_group, create_topics, unique, write_config
from sparkmirror.checkpoints.emitter import CheckpointEmitter
from sparkmirror.config import load_config
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.kafka.groupreader import CRASH_HOOK, GroupOffsetReader
from sparkmirror.kafka.groups import committed_positions
from sparkmirror.offsets.store import OffsetMapStore


def _groups(bootstrap: str, topic: str, n: int) -> dict[str, dict[tuple[str, int], int]]:
    wanted = {unique("rd"): {(topic, i % 3): 10 + i, (topic, (i + 1) % 3): 20 + i} for i in range(n)}
    for group, offsets in wanted.items():
        commit_group(bootstrap, group, offsets)
    return wanted


def test_reader_answers_what_a_consumer_per_group_answers(bootstraps) -> None:
    topic = unique("rd")
    create_topics(bootstraps["A"], {topic: 3})
    wanted = _groups(bootstraps["A"], topic, 5)
    meta = unique("rd-meta")
    c = Consumer({"bootstrap.servers": bootstraps["A"], "group.id": meta, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 1, 7, "app-state-42")], asynchronous=False)
    c.close()
    never = unique("rd-never")
    reader = GroupOffsetReader({"bootstrap.servers": bootstraps["A"]}, in_flight=2)
    try:
        reads = reader.read([*wanted, meta, never])
    finally:
        reader.close()
    assert reads.failed == {}
    partitions = [(topic, p) for p in range(3)]
    for group, offsets in wanted.items():
        assert {tp: o for tp, (o, _m) in reads.positions[group].items()} == offsets
        assert reads.positions[group] == committed_positions({"bootstrap.servers": bootstraps["A"]}, group, partitions)
    assert reads.positions[meta] == {(topic, 1): (7, "app-state-42")}
    assert reads.positions[never] == {}


def test_group_offsets_survive_the_reader_crashing(bootstraps, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    topic = unique("rd-crash")
    create_topics(bootstraps["A"], {topic: 3})
    wanted = _groups(bootstraps["A"], topic, 6)
    monkeypatch.setenv(CRASH_HOOK, "2")
    reader = GroupOffsetReader({"bootstrap.servers": bootstraps["A"]}, in_flight=1)
    try:
        reads = reader.read(list(wanted))
        assert reader.crashes == 1
        assert len(reads.positions) == 2 and set(reads.failed) == set(wanted) - set(reads.positions)
        monkeypatch.delenv(CRASH_HOOK)
        again = reader.read(list(wanted))
        assert again.failed == {} and set(again.positions) == set(wanted)
    finally:
        reader.close()

    # The emitter reads what the crashed child did not answer through consumers.
    monkeypatch.setenv(CRASH_HOOK, "2")
    cfg = write_config(tmp_path / "mm2.properties", bootstraps["A"], bootstraps["B"])
    flow = load_config(cfg).flows[0]
    clients = FlowClients(flow)
    emitter = CheckpointEmitter(clients, OffsetMapStore(clients))
    try:
        positions = emitter.group_positions("source", list(wanted), [(topic, p) for p in range(3)])
    finally:
        emitter.close()
        clients.close()
    assert {g: {tp: o for tp, (o, _m) in pos.items()} for g, pos in positions.items()} == wanted
