"""Exact offset translation, end to end on real clusters.

A consumer group commits a position on A; sparkmirror mirrors and emits
checkpoints; the checkpoint's downstream offset must equal the true position
of the group's next record on B - for a plain topic, a compacted one, one
with committed and aborted transactions, a group far behind the head, and
after a restart of the job (the KAFKA-15905 scenario). Kafka's own
RemoteClusterUtils must return the same offsets.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kafka_helpers import admin, commit_group, committed_log, create_topics, unique, wait_for, write_config
from mm2_client import translate_offsets_with_mm2
from sparkmirror.config import load_config
from sparkmirror.core.formats import Checkpoint, OffsetSync, decode_offset_map_key
from sparkmirror.core.naming import offset_map_topic
from sparkmirror.core.offsetmap import Method
from sparkmirror.kafka.internal import read_to_end
from sparkmirror.offsets.store import read_offset_map
from sparkmirror.pipeline.driver.mirror import Mirror


def _truth(source_log: list[tuple[int, bytes]], target_log: list[tuple[int, bytes]], g: int, target_end: int) -> int:
    """Where on B the group's next record (first committed source record at offset >= g) was written last."""
    nxt = next((v for off, v in source_log if off >= g), None)
    if nxt is None:
        return target_end
    return max(off for off, v in target_log if v == nxt)


def _commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    commit_group(bootstrap, group, {(topic, p): o for p, o in offsets.items()})


def _checkpoints(bootstrap: str, group: str) -> dict[tuple[str, int], Checkpoint]:
    latest = {}
    for key, value in read_to_end({"bootstrap.servers": bootstrap}, "A.checkpoints.internal"):
        if key is not None and value is not None:
            cp = Checkpoint.decode(key, value)
            if cp.group == group:
                latest[(cp.topic, cp.partition)] = cp
    return latest


def _mirror_once(bootstraps, tmp_path: Path, topic: str) -> None:
    cfg = write_config(
        tmp_path / "mm2.properties",
        bootstraps["A"],
        bootstraps["B"],
        extra=f"A->B.topics = {topic}\n",
    )
    Mirror(load_config(cfg), once=True).run()


def _check_exact(bootstraps, tmp_path: Path, topic: str, group: str, positions: dict[int, int]) -> None:
    cps = _checkpoints(bootstraps["B"], group)
    mm2 = translate_offsets_with_mm2(bootstraps["B"], "A", group, workdir=tmp_path / "mm2client")
    for p, g in positions.items():
        src = committed_log(bootstraps["A"], topic, p)
        tgt = committed_log(bootstraps["B"], f"A.{topic}", p)
        end = admin(bootstraps["B"]).list_topics(f"A.{topic}").topics  # noqa: F841 - metadata warm-up
        c = Consumer({"bootstrap.servers": bootstraps["B"], "group.id": unique("wm")})
        target_end = c.get_watermark_offsets(TopicPartition(f"A.{topic}", p), timeout=30)[1]
        c.close()
        want = _truth(src, tgt, g, target_end)
        cp = cps.get((f"A.{topic}", p))
        assert cp is not None, f"no checkpoint for {group} A.{topic}[{p}]"
        assert cp.upstream_offset == g
        assert cp.downstream_offset == want, (
            f"A.{topic}[{p}] group at {g}: checkpoint {cp.downstream_offset}, true position {want}"
        )
        assert mm2[(f"A.{topic}", p)] == want, "RemoteClusterUtils.translateOffsets disagrees"


def _produce_plain(bootstrap: str, topic: str, partitions: int, n: int, first: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(first, first + n):
        while True:
            try:
                p.produce(topic, key=f"k{i % 37}".encode(), value=f"v{i}".encode(), partition=i % partitions)
                break
            except BufferError:
                p.poll(0.1)
    assert p.flush(60) == 0


def test_plain_topic_and_a_group_10000_behind(bootstraps, spark, tmp_path: Path) -> None:
    topic = unique("tr-plain")
    create_topics(bootstraps["A"], {topic: 2})
    _produce_plain(bootstraps["A"], topic, 2, 24_000)
    group = unique("g")
    positions = {0: 2_000, 1: random.Random(1).randrange(0, 12_000)}  # partition 0: 10,000 behind its head
    _commit(bootstraps["A"], group, topic, positions)
    _mirror_once(bootstraps, tmp_path, topic)
    _check_exact(bootstraps, tmp_path, topic, group, positions)
    # MM2-format offset syncs sit on the source (offset-syncs.topic.location's default),
    # one per segment start, each a true (upstream, downstream) pair.
    syncs = [
        OffsetSync.decode(k, v)
        for k, v in read_to_end({"bootstrap.servers": bootstraps["A"]}, "mm2-offset-syncs.B.internal")
        if k is not None and v is not None
    ]
    mine = [s for s in syncs if s.topic == topic]
    assert mine and {s.partition for s in mine} == {0, 1}
    for s in mine:
        src = dict(committed_log(bootstraps["A"], topic, s.partition))
        tgt = dict(committed_log(bootstraps["B"], f"A.{topic}", s.partition))
        assert src[s.upstream_offset] == tgt[s.downstream_offset]


def test_translation_survives_a_restart_kafka_15905(bootstraps, spark, tmp_path: Path) -> None:
    topic = unique("tr-restart")
    create_topics(bootstraps["A"], {topic: 1})
    _produce_plain(bootstraps["A"], topic, 1, 1_000)
    group = unique("g")
    _commit(bootstraps["A"], group, topic, {0: 500})
    _mirror_once(bootstraps, tmp_path, topic)
    _produce_plain(bootstraps["A"], topic, 1, 1_000, first=1_000)
    _mirror_once(bootstraps, tmp_path, topic)  # a new job: map and checkpoints read back
    _check_exact(bootstraps, tmp_path, topic, group, {0: 500})


def test_transactional_topic_with_aborted_records(bootstraps, spark, tmp_path: Path) -> None:
    topic = unique("tr-tx")
    create_topics(bootstraps["A"], {topic: 1})
    tx = Producer({"bootstrap.servers": bootstraps["A"], "transactional.id": unique("tx")})
    tx.init_transactions(60)
    for k in range(6):
        tx.begin_transaction()
        for i in range(50):
            tx.produce(topic, value=f"{k}-{i}".encode(), partition=0)
        tx.flush(30)
        (tx.abort_transaction if k % 3 == 1 else tx.commit_transaction)(30)
    src = committed_log(bootstraps["A"], topic, 0)
    offsets = [o for o, _v in src]
    # Inside a committed run, at the first offset after an aborted run, and
    # on a transaction marker: one group each, one mirror pass.
    positions = {unique("g-in"): offsets[10], unique("g-after-abort"): offsets[50], unique("g-marker"): offsets[49] + 1}
    for group, g in positions.items():
        _commit(bootstraps["A"], group, topic, {0: g})
    _mirror_once(bootstraps, tmp_path, topic)
    for group, g in positions.items():
        _check_exact(bootstraps, tmp_path, topic, group, {0: g})


def test_compacted_topic(bootstraps, spark, tmp_path: Path) -> None:
    topic = unique("tr-compact")
    create_topics(
        bootstraps["A"],
        {topic: 1},
        config={
            "cleanup.policy": "compact",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": "0",
            "delete.retention.ms": "100",
        },
    )
    # Even records have their own key (kept), odd ones share one (only the
    # last survives): compaction leaves gaps all through the log.
    p = Producer({"bootstrap.servers": bootstraps["A"], "acks": "all"})
    for i in range(600):
        p.produce(topic, key=(f"k{i}" if i % 2 == 0 else "shared").encode(), value=f"v{i}".encode(), partition=0)
    p.flush(30)
    time.sleep(1.0)
    p.produce(topic, key=b"roll", value=b"roll", partition=0)  # rolls the segment
    p.flush(30)
    wait_for(
        lambda: len(committed_log(bootstraps["A"], topic, 0)) < 601, timeout_s=90, what="the source to be compacted"
    )
    src = committed_log(bootstraps["A"], topic, 0)
    offsets = [o for o, _v in src]
    gap = next(o + 1 for o, nxt in zip(offsets, offsets[1:], strict=False) if nxt > o + 1)  # a removed offset
    group = unique("g")
    _commit(bootstraps["A"], group, topic, {0: gap})
    _mirror_once(bootstraps, tmp_path, topic)
    _check_exact(bootstraps, tmp_path, topic, group, {0: gap})


@pytest.fixture(autouse=True)
def _fresh_rng() -> None:
    random.seed(0)


def test_exactly_once_map_is_folded_into_chains_that_translate_exactly(bootstraps, spark, tmp_path: Path) -> None:
    """Exactly-once writes a segment per partition per batch (the commit marker sits between
    them); the run folds them into chains. Loaded back from B, the chains translate every offset,
    both ways, to the truth read from both clusters' logs."""
    topic = unique("tr-chains")
    create_topics(bootstraps["A"], {topic: 2})
    _produce_plain(bootstraps["A"], topic, 2, 4_000)
    group = unique("g")
    positions = {0: 777, 1: 1_501}
    _commit(bootstraps["A"], group, topic, positions)
    cfg = write_config(
        tmp_path / "mm2.properties",
        bootstraps["A"],
        bootstraps["B"],
        extra=f"A->B.topics = {topic}\nsparkmirror.exactly.once = true\nsparkmirror.batch.max.records = 400\n",
    )
    flow = load_config(cfg).flows[0]
    Mirror(load_config(cfg), once=True).run()
    latest: dict[bytes, bytes | None] = {}
    for key, value in read_to_end({"bootstrap.servers": bootstraps["B"]}, offset_map_topic("A")):
        assert key is not None
        latest[key] = value
    mine = [decode_offset_map_key(k) for k, v in latest.items() if v is not None]
    mine = [m for m in mine if m[1] == topic]
    chained = {(p, start) for version, _t, p, start in mine if version == 1}
    assert {p for p, _s in chained} == {0, 1}, f"no chains on B for both partitions: {sorted(mine)}"
    omap = read_offset_map({"bootstrap.servers": bootstraps["B"]}, flow)
    for p in (0, 1):
        pm = omap.partition(topic, p)
        assert pm is not None and pm.chains() and all(c.gap == 1 for c in pm.chains())
        assert len(pm) >= 5, "one batch of 400 records or fewer a partition: several segments each"
        src = committed_log(bootstraps["A"], topic, p)
        tgt = committed_log(bootstraps["B"], f"A.{topic}", p)
        copy = {v: off for off, v in tgt}
        record_at = {off: v for off, v in tgt}
        for u, value in src:
            t = omap.translate(topic, p, u)
            assert (t.downstream_offset, t.method) == (copy[value], Method.EXACT), (p, u, t)
        src_offset = {v: off for off, v in src}
        for d in range(tgt[0][0], tgt[-1][0] + 1):
            r = omap.reverse_translate(topic, p, d)
            if d in record_at:
                assert (r.upstream_offset, r.method) == (src_offset[record_at[d]], Method.EXACT), (p, d, r)
            else:  # a commit marker: every record below it was read
                assert (
                    r.method is Method.GAP and r.upstream_offset == max(src_offset[v] for off, v in tgt if off < d) + 1
                ), (p, d, r)
    _check_exact(bootstraps, tmp_path, topic, group, positions)
