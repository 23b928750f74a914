"""Kafka's own MM2 client reads the checkpoints sparkmirror's formats encode.

An application that fails over with ``RemoteClusterUtils.translateOffsets`` (Maven
``org.apache.kafka:connect-mirror-client``) reads ``<source>.checkpoints.internal`` on
the target. These tests write records with :class:`sparkmirror.core.formats.Checkpoint`
and run the real Java client on them (``tests/mm2client``), so a byte that differs
from MM2's layout fails here. Every test uses its own source alias ``S<uuid8>``.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from kafka_helpers import Rec, create_topics, produce, unique
from mm2_client import (
    remote_cluster_names,
    replication_hops_with_mm2,
    translate_offsets_with_mm2,
)
from sparkmirror.core.formats import Checkpoint


@pytest.fixture(scope="module")
def mm2_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mm2client")


def _alias() -> str:
    return f"S{uuid.uuid4().hex[:8]}"


def _checkpoints_topic(bootstrap: str, alias: str) -> str:
    topic = f"{alias}.checkpoints.internal"
    create_topics(bootstrap, {topic: 1}, {"cleanup.policy": "compact"})
    return topic


def _write(bootstrap: str, topic: str, checkpoints: list[Checkpoint]) -> None:
    now = int(time.time() * 1000)
    produce(bootstrap, topic, 0, [Rec(c.key_bytes(), c.value_bytes(), (), now) for c in checkpoints])


def test_translate_offsets_returns_the_downstream_offsets_of_our_checkpoints(bootstraps, mm2_workdir: Path) -> None:
    alias = _alias()
    topic = _checkpoints_topic(bootstraps["B"], alias)
    group, other_group = unique("app"), unique("other")
    remote = f"{alias}.orders"  # MM2's remote name of source topic "orders" on the target
    _write(
        bootstraps["B"],
        topic,
        [
            Checkpoint(group, remote, 0, upstream_offset=100, downstream_offset=90),
            Checkpoint(group, remote, 1, upstream_offset=10, downstream_offset=7, metadata="m"),
            Checkpoint(group, remote, 2, upstream_offset=5_000_000_000, downstream_offset=4_000_000_001),
            Checkpoint(other_group, remote, 0, upstream_offset=1, downstream_offset=1),
            Checkpoint(group, f"{alias}.payments", 0, upstream_offset=3, downstream_offset=0),
            # The same key again: the later checkpoint must win.
            Checkpoint(group, remote, 1, upstream_offset=25, downstream_offset=20),
        ],
    )

    got = translate_offsets_with_mm2(bootstraps["B"], alias, group, workdir=mm2_workdir)

    assert got == {
        (remote, 0): 90,
        (remote, 1): 20,
        (remote, 2): 4_000_000_001,
        (f"{alias}.payments", 0): 0,
    }
    assert translate_offsets_with_mm2(bootstraps["B"], alias, other_group, workdir=mm2_workdir) == {(remote, 0): 1}


def test_translate_offsets_trusts_the_last_checkpoint_not_the_highest(bootstraps, mm2_workdir: Path) -> None:
    """The client keeps the last record per key, even a lower one: the no-rewind rule
    can only be kept by the writer of the checkpoints, never by this reader."""
    alias = _alias()
    topic = _checkpoints_topic(bootstraps["B"], alias)
    group = unique("app")
    remote = f"{alias}.orders"
    _write(
        bootstraps["B"],
        topic,
        [
            Checkpoint(group, remote, 0, upstream_offset=50, downstream_offset=40),
            Checkpoint(group, remote, 0, upstream_offset=30, downstream_offset=25),
        ],
    )

    assert translate_offsets_with_mm2(bootstraps["B"], alias, group, workdir=mm2_workdir) == {(remote, 0): 25}


def test_translate_offsets_of_a_group_without_checkpoints_is_empty(bootstraps, mm2_workdir: Path) -> None:
    alias = _alias()
    topic = _checkpoints_topic(bootstraps["B"], alias)
    _write(bootstraps["B"], topic, [Checkpoint(unique("app"), f"{alias}.orders", 0, 1, 1)])

    assert translate_offsets_with_mm2(bootstraps["B"], alias, unique("absent"), workdir=mm2_workdir) == {}


def test_remote_cluster_utils_finds_internal_topics_by_mm2_names(bootstraps, mm2_workdir: Path) -> None:
    alias, further = _alias(), _alias()
    checkpoints = _checkpoints_topic(bootstraps["B"], alias)
    # Heartbeats replicated from `alias` (one hop) and from `further` through `alias` (two).
    create_topics(bootstraps["B"], {f"{alias}.heartbeats": 1, f"{alias}.{further}.heartbeats": 1})

    assert checkpoints in remote_cluster_names("checkpointTopics", bootstraps["B"], workdir=mm2_workdir)
    heartbeats = remote_cluster_names("heartbeatTopics", bootstraps["B"], workdir=mm2_workdir)
    assert {f"{alias}.heartbeats", f"{alias}.{further}.heartbeats"} <= heartbeats
    assert {alias, further} <= remote_cluster_names("upstreamClusters", bootstraps["B"], workdir=mm2_workdir)
    assert replication_hops_with_mm2(bootstraps["B"], alias, workdir=mm2_workdir) == 1
    assert replication_hops_with_mm2(bootstraps["B"], further, workdir=mm2_workdir) == 2


def test_translate_offsets_reads_only_partition_0_of_the_checkpoints_topic(bootstraps, mm2_workdir: Path) -> None:
    """Checkpoints anywhere but partition 0 are invisible to Kafka's client."""
    alias = _alias()
    topic = f"{alias}.checkpoints.internal"
    create_topics(bootstraps["B"], {topic: 2}, {"cleanup.policy": "compact"})
    group, remote, now = unique("app"), f"{alias}.orders", int(time.time() * 1000)
    seen, unseen = Checkpoint(group, remote, 0, 6, 6), Checkpoint(group, remote, 1, 5, 5)
    produce(bootstraps["B"], topic, 0, [Rec(seen.key_bytes(), seen.value_bytes(), (), now)])
    produce(bootstraps["B"], topic, 1, [Rec(unseen.key_bytes(), unseen.value_bytes(), (), now)])

    assert translate_offsets_with_mm2(bootstraps["B"], alias, group, workdir=mm2_workdir) == {(remote, 0): 6}


def test_a_tombstone_in_the_checkpoints_topic_breaks_translate_offsets(bootstraps, mm2_workdir: Path) -> None:
    """Kafka's client fails on a null value (NullPointerException, not skipped like bad
    bytes), so a checkpoint must never be deleted with a tombstone."""
    alias = _alias()
    topic = _checkpoints_topic(bootstraps["B"], alias)
    c = Checkpoint(unique("app"), f"{alias}.orders", 0, 5, 5)
    now = int(time.time() * 1000)
    produce(
        bootstraps["B"],
        topic,
        0,
        [Rec(c.key_bytes(), c.value_bytes(), (), now), Rec(c.key_bytes(), None, (), now)],
    )

    with pytest.raises(AssertionError, match="NullPointerException"):
        translate_offsets_with_mm2(bootstraps["B"], alias, c.group, workdir=mm2_workdir)
