"""Replacing a running MirrorMaker 2 in place, and handing back to it, with Apache Kafka's own MM2.

MM2 (dedicated mode, from Maven Central) mirrors a topic from A to B on an ``mm2.properties`` file and
is stopped; more records arrive; ``sparkmirror run --once`` on the same file adopts MM2's committed
source offsets (Connect's offsets topic on B) and copies only what MM2 had not. Then sparkmirror
copies some more, ``sparkmirror handback mm2`` writes MM2's offsets from sparkmirror's progress, and
MM2 started again copies only what sparkmirror had not; sparkmirror taking over once more adopts
MM2's newer position. At every step B holds every source record exactly once, in source order: 0
duplicates, 0 lost. After each switch, ``offsets index-history`` maps what MM2 copied, and a group
positioned there translates exactly. At least once and exactly once (sparkmirror's side).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from kafka_helpers import (
    Rec,
    close_bounded,
    commit_group,
    committed_log,
    create_topics,
    end_offsets,
    produce,
    read_partition,
    run_cli,
    unique,
    wait_for,
    write_config,
)
from mm2_process import MM2_LINES, mirror_maker, tail
from sparkmirror.core.connect_offsets import encode_key
from sparkmirror.core.formats import Checkpoint
from sparkmirror.kafka.internal import read_to_end

PARTITIONS = 3


def _produce(bootstrap: str, topic: str, first: int, per_partition: int) -> None:
    import time

    now = int(time.time() * 1000)
    for p in range(PARTITIONS):
        recs = [Rec(f"k{i}".encode(), f"{p}-{i}".encode(), (), now) for i in range(first, first + per_partition)]
        produce(bootstrap, topic, p, recs)


def _check_exactly_once_each(bootstrap: str, remote: str, per_partition: int) -> None:
    """B's remote partitions hold records 0 .. per_partition-1 of each source partition once, in order."""
    for p in range(PARTITIONS):
        got = [r.value for r in read_partition(bootstrap, remote, p)]
        expected = [f"{p}-{i}".encode() for i in range(per_partition)]
        dupes = len(got) - len(set(got))
        assert dupes == 0, f"{remote}[{p}]: {dupes} records copied twice"
        assert got == expected, f"{remote}[{p}]: {len(got)} records, {len(set(expected) - set(got))} missing"


def _mm2_offsets(bootstrap: str, source: str, topic: str) -> dict[int, int]:
    """MM2's committed offset per partition, read raw from Connect's offsets topic (and its key bytes checked
    against sparkmirror's encoder: the format handback writes must be the one Connect wrote)."""
    name = f"mm2-offsets.{source}.internal"
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique("mm2-offsets-reader"), "enable.auto.commit": False}
    )
    out: dict[int, int] = {}
    try:
        md = c.list_topics(name, timeout=30).topics.get(name)
        if md is None or md.error is not None:
            return out
        tps = [TopicPartition(name, p, 0) for p in md.partitions]
        ends = {tp.partition: c.get_watermark_offsets(tp, timeout=30)[1] for tp in tps}
        c.assign([tp for tp in tps if ends[tp.partition] > 0])
        seen = {p: 0 for p in ends if ends[p] > 0}
        while any(seen[p] < ends[p] for p in seen):
            for m in c.consume(500, 1.0):
                if m.error():
                    continue
                seen[m.partition()] = m.offset() + 1
                key = json.loads(m.key())
                if key[0] != "MirrorSourceConnector" or key[1].get("topic") != topic:
                    continue
                assert m.key() == encode_key(key[0], source, topic, key[1]["partition"]), m.key()
                if m.value() is None:
                    out.pop(key[1]["partition"], None)
                else:
                    out[key[1]["partition"]] = json.loads(m.value())["offset"]
    finally:
        close_bounded(c)
    return out


def _checkpoints(bootstrap: str, group: str) -> list[Checkpoint]:
    """Every checkpoint of ``group`` in B's checkpoints topic, MM2's and sparkmirror's, in the order written."""
    out = []
    for k, v in read_to_end({"bootstrap.servers": bootstrap}, "A.checkpoints.internal"):
        if k is not None and v is not None:
            cp = Checkpoint.decode(k, v)
            if cp.group == group:
                out.append(cp)
    return out


def _mm2_copies(
    config: Path, workdir: Path, name: str, bootstraps: dict[str, str], topic: str, total: int, group: str = ""
) -> None:
    """MM2 runs until B holds ``total`` records a partition and its offsets say so (and, given ``group``, it
    checkpointed the group), then is stopped."""
    remote = f"A.{topic}"
    with mirror_maker(config, workdir, name) as proc:
        wait_for(
            lambda: proc.poll() is None and sum(end_offsets(bootstraps["B"], remote).values()) >= total * PARTITIONS,
            timeout_s=180,
            what=f"MM2 ({name}) to copy {topic}: {tail(workdir, name, 1500)}",
            interval_s=1.0,
        )
        wait_for(
            lambda: _mm2_offsets(bootstraps["B"], "A", topic) == {p: total - 1 for p in range(PARTITIONS)},
            timeout_s=60,
            what=f"MM2 ({name}) to commit its source offsets",
            interval_s=1.0,
        )
        if group:
            wait_for(
                lambda: {cp.partition for cp in _checkpoints(bootstraps["B"], group)} == set(range(PARTITIONS)),
                timeout_s=120,
                what=f"MM2 ({name}) to checkpoint group {group}: {tail(workdir, name, 1500)}",
                interval_s=1.0,
            )


@pytest.mark.parametrize("mode", ["at-least-once", "exactly-once"])
def test_mm2_to_sparkmirror_and_back_copies_nothing_twice(
    bootstraps: dict[str, str], tmp_path: Path, mode: str
) -> None:
    topic = unique("orders")
    create_topics(bootstraps["A"], {topic: PARTITIONS})
    extra = f"A->B.topics = {topic}\n{MM2_LINES}"
    if mode == "exactly-once":
        extra += "sparkmirror.exactly.once = true\n"
    cfg = write_config(tmp_path / "mm2.properties", bootstraps["A"], bootstraps["B"], extra=extra)
    remote = f"A.{topic}"

    # MM2 mirrors 1,000 records a partition (and checkpoints a group at 400) and is stopped; 1,000 more arrive.
    _produce(bootstraps["A"], topic, 0, 1000)
    group = unique("app")
    commit_group(bootstraps["A"], group, {(topic, p): 400 for p in range(PARTITIONS)})
    _mm2_copies(cfg, tmp_path, "mm2-first", bootstraps, topic, 1000, group)
    _produce(bootstraps["A"], topic, 1000, 1000)

    # sparkmirror on the same file adopts MM2's position: nothing MM2 copied is copied again.
    first = run_cli("run", str(cfg), "--once", timeout_s=600)
    assert first.returncode == 0, first.stdout + first.stderr[-4000:]
    assert "adopted MirrorMaker 2's position from Connect's offsets topic mm2-offsets.A.internal" in first.stderr
    _check_exactly_once_each(bootstraps["B"], remote, 2000)

    # MM2's range translated exactly: index-history maps what MM2 copied, and the group at 400 (MM2's
    # sparse offset syncs translated it to an earlier sync) translates to its next record on B.
    _index_history(cfg, bootstraps, topic, group, 400, indexed=1000)

    # A restart adopts nothing again (MM2's position is behind sparkmirror's own now). The group moved
    # into what sparkmirror copied.
    _produce(bootstraps["A"], topic, 2000, 500)
    commit_group(bootstraps["A"], group, {(topic, p): 1500 for p in range(PARTITIONS)})
    again = run_cli("run", str(cfg), "--once", timeout_s=600)
    assert again.returncode == 0, again.stdout + again.stderr[-4000:]
    assert "adopted" not in again.stderr
    _check_exactly_once_each(bootstraps["B"], remote, 2500)
    # Checkpoints continue across the switch: never lower than MM2's (the group never rewound), and exact
    # where sparkmirror copied: the group's next record on B.
    cps = _checkpoints(bootstraps["B"], group)
    for p in range(PARTITIONS):
        mine = [cp for cp in cps if cp.partition == p]
        downs = [cp.downstream_offset for cp in mine]
        assert downs == sorted(downs), f"{topic}[{p}]: checkpoints went back across the switch: {downs}"
        at = {value: offset for offset, value in committed_log(bootstraps["B"], remote, p)}
        assert (mine[-1].upstream_offset, mine[-1].downstream_offset) == (1500, at[f"{p}-1500".encode()])

    # Hand back: MM2 resumes where sparkmirror stopped.
    back = run_cli("handback", "mm2", str(cfg), timeout_s=300)
    assert back.returncode == 0, back.stdout + back.stderr[-4000:]
    assert f"flow=A->B: MirrorMaker 2 resumes {PARTITIONS} partitions from mm2-offsets.A.internal on B" in back.stdout
    assert _mm2_offsets(bootstraps["B"], "A", topic) == {p: 2499 for p in range(PARTITIONS)}
    _produce(bootstraps["A"], topic, 2500, 500)
    _mm2_copies(cfg, tmp_path, "mm2-second", bootstraps, topic, 3000)
    _check_exactly_once_each(bootstraps["B"], remote, 3000)

    # And over to sparkmirror once more: MM2 ran after it, so its newer position is adopted.
    _produce(bootstrap=bootstraps["A"], topic=topic, first=3000, per_partition=200)
    last = run_cli("run", str(cfg), "--once", timeout_s=600)
    assert last.returncode == 0, last.stdout + last.stderr[-4000:]
    assert "adopted MirrorMaker 2's position" in last.stderr
    _check_exactly_once_each(bootstraps["B"], remote, 3200)

    # index-history again: MM2's second stint (after what sparkmirror's map already holds) is indexed.
    commit_group(bootstraps["A"], group, {(topic, p): 2700 for p in range(PARTITIONS)})
    _index_history(cfg, bootstraps, topic, group, 2700, indexed=500)


def _index_history(
    cfg: Path, bootstraps: dict[str, str], topic: str, group: str, position: int, *, indexed: int
) -> None:
    """``offsets index-history`` maps ``indexed`` records of MM2's a partition, and the group at ``position``
    translates to the remote offset of its next record (the record itself checked on B)."""
    remote = f"A.{topic}"
    done = run_cli("offsets", "index-history", str(cfg), "--json", timeout_s=600)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    parts = json.loads(done.stdout)[0]["partitions"]
    assert [(p["status"], p["records"]) for p in parts] == [("indexed", indexed)] * PARTITIONS, parts
    translated = run_cli(
        "offsets", "translate", str(cfg), "--source", "A", "--target", "B", "--group", group, "--json", timeout_s=300
    )
    assert translated.returncode == 0, translated.stdout + translated.stderr[-4000:]
    report = json.loads(translated.stdout)
    for p in range(PARTITIONS):
        at = {value: offset for offset, value in committed_log(bootstraps["B"], remote, p)}
        row = next(r for r in report["partitions"] if r["partition"] == p)
        assert (row["source_offset"], row["method"].lower()) == (position, "exact"), row
        assert row["target_offset"] == at[f"{p}-{position}".encode()], row
