"""The JVM writer (``sparkmirror.writer = jvm``) copies what the Python writer copies, also exactly once.

Every record's key, value, headers, timestamp and partition arrive on B, also null keys and values
and a header without a value; the offset map pairs each source offset with the target offset its
record got, also where another writer's records already sit in the remote partition, and across
two runs. Refusals, dead-lettering and exact translation across
transaction markers and aborted records are checked for both writers in test_record_errors.py and
test_offset_translation.py.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from kafka_helpers import Rec, create_topics, produce, read_partition, unique, write_config
from kafka_helpers import varied_records as _records
from sparkmirror.config import load_config
from sparkmirror.core.naming import progress_group
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.kafka.groups import committed_offsets
from sparkmirror.offsets.store import read_offset_map
from sparkmirror.pipeline.driver import batch
from sparkmirror.pipeline.driver.mirror import Mirror
from sparkmirror.pipeline.jvm import writer


def _jvm_config(bootstraps, tmp_path: Path, checkpoints: Path, topic: str, extra: str = "") -> Path:
    """A flow of ``topic`` alone, written by the JVM writer (remote topics keep their own configs)."""
    return write_config(
        tmp_path / "mm2.properties",
        bootstraps["A"],
        bootstraps["B"],
        checkpoints=checkpoints,
        extra=f"A->B.topics = {topic}\nsparkmirror.writer = jvm\nsync.topic.configs.enabled = false\n{extra}",
    )


EXACTLY_ONCE = "exactly.once.source.support = enabled\n"


def _three_partitions(bootstraps, prefix: str, first_records: int) -> tuple[str, dict[int, list[Rec]]]:
    """A source topic of 3 partitions and its remote topic; partition p holds ``first_records + 50 * p`` records."""
    topic = unique(prefix)
    create_topics(bootstraps["A"], {topic: 3})
    create_topics(bootstraps["B"], {f"A.{topic}": 3})
    sent = {p: _records(p, first_records + 50 * p) for p in range(3)}
    for p, recs in sent.items():
        produce(bootstraps["A"], topic, p, recs)
    return topic, sent


def test_jvm_writer_copies_every_field_and_maps_every_offset(
    bootstraps, spark, tmp_path: Path, checkpoints, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fewer partitions fetched at a time than a task holds: the others wait, paused, for a free place.
    monkeypatch.setattr(writer, "FETCH_WINDOW", 1)
    foreign = [Rec(b"other", b"another writer", (), int(time.time() * 1000))] * 5
    topic, sent = _three_partitions(bootstraps, "jvmw", 200)
    produce(bootstraps["B"], f"A.{topic}", 1, foreign)  # the remote partition does not start at 0
    cfg = _jvm_config(bootstraps, tmp_path, checkpoints, topic)
    # The foreign records are on purpose: copy after them (a first start would refuse them otherwise).
    Mirror(load_config(cfg), once=True, existing_records="copy-again").run()
    # A second batch, after the first: its segments continue the first one's.
    more = {p: _records(p, 30, first=len(sent[p])) for p in range(3)}
    for p, recs in more.items():
        produce(bootstraps["A"], topic, p, recs)
        sent[p] = sent[p] + recs
    Mirror(load_config(cfg), once=True).run()

    for p, recs in sent.items():
        got = read_partition(bootstraps["B"], f"A.{topic}", p)
        if p == 1:
            assert got[:5] == foreign
            got = got[5:]
        assert got == recs, f"A.{topic}[{p}] differs from {topic}[{p}]"

    flow = load_config(cfg).flows[0]
    offsets = read_offset_map(FlowClients(flow).target_consumer, flow)
    for p, recs in sent.items():
        shift = 5 if p == 1 else 0
        for u in (0, 1, 137, len(recs) - 31, len(recs) - 30, len(recs) - 1):
            t = offsets.translate(topic, p, u)
            assert t.downstream_offset == u + shift, f"{topic}[{p}] offset {u}: {t}"


def test_jvm_writer_exactly_once_writes_once_with_its_progress_and_offset_map(
    bootstraps, spark, tmp_path: Path, checkpoints, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two transaction groups over three partitions (a task holds several ids); the second run has lost
    Spark's checkpoint, so only the progress committed on the target keeps it from writing again."""
    writers: list[str] = []

    def copy_in_jvm(sc, plan, groups):  # type: ignore[no-untyped-def]
        results = writer.copy_in_jvm(sc, plan, groups)
        writers.extend(r.writer for r in results)
        return results

    monkeypatch.setattr(batch, "copy_in_jvm", copy_in_jvm)
    foreign = [Rec(b"other", b"another writer", (), int(time.time() * 1000))] * 5
    topic, sent = _three_partitions(bootstraps, "jvmw-eos", 200)
    produce(bootstraps["B"], f"A.{topic}", 1, foreign)  # the remote partition does not start at 0
    cfg = _jvm_config(
        bootstraps, tmp_path, checkpoints, topic, EXACTLY_ONCE + "sparkmirror.exactly.once.transactions = 2\n"
    )
    Mirror(load_config(cfg), once=True, existing_records="copy-again").run()
    first = {p: len(recs) for p, recs in sent.items()}
    more = {p: _records(p, 30, first=len(sent[p])) for p in range(3)}
    for p, recs in more.items():
        produce(bootstraps["A"], topic, p, recs)
        sent[p] = sent[p] + recs
    shutil.rmtree(checkpoints)
    Mirror(load_config(cfg), once=True).run()

    assert writers and all(w.startswith("jvm:") for w in writers), writers  # the JVM wrote every range
    for p, recs in sent.items():
        got = read_partition(bootstraps["B"], f"A.{topic}", p)
        if p == 1:
            assert got[:5] == foreign
            got = got[5:]
        assert got == recs, f"A.{topic}[{p}] differs from {topic}[{p}] (duplicates or loss)"

    flow = load_config(cfg).flows[0]
    progress = committed_offsets(
        FlowClients(flow).target_consumer, progress_group("A", "B"), [(f"A.{topic}", p) for p in range(3)]
    )
    assert progress == {(f"A.{topic}", p): len(sent[p]) for p in range(3)}
    offsets = read_offset_map(FlowClients(flow).target_consumer, flow)
    for p, recs in sent.items():
        shift = 5 if p == 1 else 0
        for u in (0, 1, 137, first[p] - 1):
            t = offsets.translate(topic, p, u)
            assert t.downstream_offset == u + shift, f"{topic}[{p}] offset {u}: {t}"
        for u in (first[p], len(recs) - 1):  # past the first run's commit marker
            t = offsets.translate(topic, p, u)
            assert t.downstream_offset == u + shift + 1, f"{topic}[{p}] offset {u}: {t}"


def test_jvm_writer_exactly_once_retry_after_its_commit_skips_what_the_target_holds(
    bootstraps, spark, tmp_path: Path, checkpoints, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every task's first attempt fails right after its transactions committed (test hook): Spark's retry
    makes new producers, reads the progress on the target as each partition's floor and writes nothing
    again. Without the floor every record would be on B twice."""
    monkeypatch.setenv("SPARKMIRROR_TEST_FAIL_AFTER_COMMIT", "1")
    topic, sent = _three_partitions(bootstraps, "jvmw-floor", 100)
    cfg = _jvm_config(bootstraps, tmp_path, checkpoints, topic, EXACTLY_ONCE)
    copier = spark.sparkContext._jvm.sparkmirror.jvm.RangeCopier
    failed_before = copier.testHookFailuresAfterCommit()
    Mirror(load_config(cfg), once=True).run()
    assert copier.testHookFailuresAfterCommit() > failed_before  # tasks did fail after their commit
    for p, recs in sent.items():
        assert read_partition(bootstraps["B"], f"A.{topic}", p) == recs, f"A.{topic}[{p}]: duplicates or loss"


def test_jvm_writer_copies_a_record_above_a_mebibyte_where_the_topic_allows_it(
    bootstraps, spark, tmp_path: Path, checkpoints
) -> None:
    topic = unique("jvmw-big")
    big = {"max.message.bytes": "3000000"}
    create_topics(bootstraps["A"], {topic: 1}, config=big)
    create_topics(bootstraps["B"], {f"A.{topic}": 1}, config=big)
    now = int(time.time() * 1000)
    recs = [Rec(b"small", b"v", (), now), Rec(b"big", b"x" * 1_500_000, (), now), Rec(b"after", b"w", (), now)]
    produce(bootstraps["A"], topic, 0, recs, **{"message.max.bytes": 3_000_000})
    cfg = _jvm_config(bootstraps, tmp_path, checkpoints, topic)
    Mirror(load_config(cfg), once=True).run()
    assert read_partition(bootstraps["B"], f"A.{topic}", 0) == recs
