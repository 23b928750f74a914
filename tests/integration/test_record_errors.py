"""Records the target refuses for good: stop with a clear error, or dead-letter them.

Nothing is dropped silently: without errors.tolerance the flow stops naming
topic, partition and offset, and commits nothing past the refused record;
with errors.tolerance=all the record goes to the dead-letter topic with the
error in Kafka Connect's header names, and the flow goes on.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kafka_helpers import Rec, create_topics, end_offsets, produce, read_partition, unique, write_config
from sparkmirror.config import load_config
from sparkmirror.pipeline.driver.mirror import Mirror
from sparkmirror.pipeline.exceptions import FlowFailed

LIMIT = 2000


def _setup(bootstraps: dict[str, str], prefix: str) -> tuple[str, list[Rec]]:
    topic = f"{prefix}.big"
    create_topics(bootstraps["A"], {topic: 1})
    # The remote topic already exists on B with a smaller record limit.
    create_topics(bootstraps["B"], {f"A.{topic}": 1}, config={"max.message.bytes": str(LIMIT)})
    ts = int(time.time() * 1000)
    records = [Rec(f"k{i}".encode(), (b"x" * 5000 if i == 3 else f"v{i}".encode()), (), ts) for i in range(6)]
    produce(bootstraps["A"], topic, 0, records)
    return topic, records


def _writer_lines(writer: str) -> str:
    """``python`` or ``java`` (the tasks' clients: librdkafka's or the transport JVM's), then `` exactly-once``
    or not: the config lines of that writer and mode."""
    name, _, mode = writer.partition(" ")
    transport = {"python": "librdkafka", "java": "java"}[name]
    return f"sparkmirror.transport = {transport}\n" + ("exactly.once.source.support = enabled\n" if mode else "")


def _dead_letter_config(bootstraps, tmp_path: Path, topics: str, dlq: str, writer: str) -> Path:
    """A flow of ``topics`` with ``errors.tolerance = all`` into ``dlq``, written by ``writer`` (`_writer_lines`)."""
    return write_config(
        tmp_path / "mm2.properties",
        bootstraps["A"],
        bootstraps["B"],
        extra=(
            f"A->B.topics = {topics}\nsync.topic.configs.enabled = false\n"
            f"errors.tolerance = all\nerrors.deadletterqueue.topic.name = {dlq}\n{_writer_lines(writer)}"
        ),
    )


WRITERS = pytest.mark.parametrize("writer", ["python", "java"])
#: Exactly once too: a record refused by the size check, before sending, is settled inside the
#: group's transaction.
WRITERS_AND_EXACTLY_ONCE = pytest.mark.parametrize(
    "writer", ["python", "python exactly-once", "java", "java exactly-once"]
)


@WRITERS_AND_EXACTLY_ONCE
def test_record_too_large_stops_the_flow_naming_topic_partition_offset(
    bootstraps, spark, tmp_path: Path, writer: str
) -> None:
    prefix = unique("toolarge")
    topic, _ = _setup(bootstraps, prefix)
    cfg = write_config(
        tmp_path / "mm2.properties",
        bootstraps["A"],
        bootstraps["B"],
        extra=f"A->B.topics = {prefix}\\..*\nsync.topic.configs.enabled = false\n{_writer_lines(writer)}",
    )
    with pytest.raises(FlowFailed) as err:
        Mirror(load_config(cfg), once=True).run()
    text = str(err.value)
    assert f"{topic}[0] offset=3" in text
    assert "max.message.bytes" in text
    assert "errors.tolerance=all" in text
    if writer.endswith("exactly-once"):
        # The group's transaction aborted: nothing of it reaches read_committed readers.
        assert read_partition(bootstraps["B"], f"A.{topic}", 0) == []


@WRITERS_AND_EXACTLY_ONCE
def test_errors_tolerance_all_sends_the_record_to_the_dead_letter_topic(
    bootstraps, spark, tmp_path: Path, writer: str
) -> None:
    prefix = unique("dlq")
    topic, records = _setup(bootstraps, prefix)
    dlq = f"{prefix}.dlq"
    cfg = _dead_letter_config(bootstraps, tmp_path, f"{prefix}\\.big", dlq, writer)
    runners = Mirror(load_config(cfg), once=True).run()
    assert runners[0].progress.dead_lettered == 1
    mirrored = [r.value for r in read_partition(bootstraps["B"], f"A.{topic}", 0)]
    assert mirrored == [r.value for r in records if len(r.value or b"") < 5000]
    if not writer.endswith("exactly-once"):  # exactly-once: a commit marker follows the record
        assert end_offsets(bootstraps["B"], dlq) == {0: 1}
    (dead,) = read_partition(bootstraps["B"], dlq, 0)
    headers = dict(dead.headers)
    assert dead.key == b"k3"
    assert headers["__connect.errors.topic"] == topic.encode()
    assert headers["__connect.errors.partition"] == b"0"
    assert headers["__connect.errors.offset"] == b"3"
    assert b"MSG_SIZE_TOO_LARGE" in headers["__connect.errors.exception.message"]
    # The value is what the target refused; the DLQ record says where it is.
    assert dead.value is None
    assert headers["__connect.errors.value.omitted.bytes"] == b"5000"


@WRITERS
def test_a_record_the_broker_refuses_is_dead_lettered_whole(bootstraps, spark, tmp_path: Path, writer: str) -> None:
    """A refusal that comes back from the broker (a null key for a compacted remote topic: INVALID_RECORD),
    not from the writer's own size check: the record goes to the dead-letter topic, and no record is lost:
    the broker refuses the produce batch that holds it, so records batched with it are dead-lettered too
    (librdkafka cannot tell them apart, docs/faults.md), and every source record is on the target or in
    the dead-letter topic."""
    prefix = unique("invalid")
    topic = f"{prefix}.keys"
    create_topics(bootstraps["A"], {topic: 1})
    create_topics(bootstraps["B"], {f"A.{topic}": 1}, config={"cleanup.policy": "compact"})
    ts = int(time.time() * 1000)
    records = [Rec((None if i == 2 else f"k{i}".encode()), f"v{i}".encode(), (("h", b"1"),), ts) for i in range(5)]
    produce(bootstraps["A"], topic, 0, records)
    dlq = f"{prefix}.dlq"
    cfg = _dead_letter_config(bootstraps, tmp_path, f"{prefix}\\.keys", dlq, writer)
    runners = Mirror(load_config(cfg), once=True).run()
    mirrored = read_partition(bootstraps["B"], f"A.{topic}", 0)
    dead = read_partition(bootstraps["B"], dlq, 0)
    assert runners[0].progress.dead_lettered == len(dead) >= 1
    offsets = {int(dict(d.headers)["__connect.errors.offset"]) for d in dead}
    assert 2 in offsets
    assert sorted([r.key for r in mirrored] + [records[o].key for o in offsets], key=str) == sorted(
        [r.key for r in records], key=str
    )
    assert all(r in records for r in mirrored)
    (invalid,) = [d for d in dead if dict(d.headers)["__connect.errors.offset"] == b"2"]
    headers = dict(invalid.headers)
    assert (invalid.key, invalid.value) == (None, b"v2")
    assert headers["__connect.errors.remote.topic"] == f"A.{topic}".encode()
    assert b"INVALID_RECORD" in headers["__connect.errors.exception.message"]


def test_exactly_once_stops_on_a_record_the_broker_refuses_naming_it(bootstraps, spark, tmp_path: Path) -> None:
    """Inside a transaction the broker's refusal makes the transaction abortable, so the record cannot be
    dead-lettered there: the transaction aborts (nothing of it reaches read_committed readers) and the
    flow stops naming the record (its produce batch's offsets), also with errors.tolerance=all
    (docs/faults.md)."""
    prefix = unique("invalid-eos")
    topic = f"{prefix}.keys"
    create_topics(bootstraps["A"], {topic: 1})
    create_topics(bootstraps["B"], {f"A.{topic}": 1}, config={"cleanup.policy": "compact"})
    ts = int(time.time() * 1000)
    records = [Rec((None if i == 2 else f"k{i}".encode()), f"v{i}".encode(), (), ts) for i in range(5)]
    produce(bootstraps["A"], topic, 0, records)
    dlq = f"{prefix}.dlq"
    cfg = _dead_letter_config(bootstraps, tmp_path, f"{prefix}\\.keys", dlq, "python exactly-once")
    with pytest.raises(FlowFailed) as err:
        Mirror(load_config(cfg), once=True).run()
    text = str(err.value)
    # librdkafka fails the refused record's produce batch whole: the flow names the batch's offsets.
    assert f"{topic}[0] offset" in text and ("offset=2" in text or "offsets 0..4" in text), text
    assert "INVALID_RECORD" in text
    assert "exactly-once cannot dead-letter it" in text
    assert read_partition(bootstraps["B"], f"A.{topic}", 0) == []


def test_exactly_once_names_the_refused_batch_also_with_records_queued_behind_it(
    bootstraps, spark, tmp_path: Path
) -> None:
    """Two partitions in one transaction group, one of them with thousands of records: when the broker
    refuses a batch, librdkafka purges what the producer held behind it and refuses further records.
    The flow still stops naming the refused batch, not a purged record, and its transaction commits
    nothing."""
    prefix = unique("invalid-eos-queued")
    topic = f"{prefix}.keys"
    create_topics(bootstraps["A"], {topic: 2})
    create_topics(bootstraps["B"], {f"A.{topic}": 2}, config={"cleanup.policy": "compact"})
    ts = int(time.time() * 1000)
    produce(bootstraps["A"], topic, 0, [Rec(f"k{i}".encode(), b"v" * 200, (), ts) for i in range(20_000)])
    produce(bootstraps["A"], topic, 1, [Rec(None if i == 2 else f"k{i}".encode(), b"v", (), ts) for i in range(5)])
    dlq = f"{prefix}.dlq"
    cfg = _dead_letter_config(bootstraps, tmp_path, f"{prefix}\\.keys", dlq, "python exactly-once")
    cfg.write_text(cfg.read_text() + "sparkmirror.exactly.once.transactions = 1\n")
    with pytest.raises(FlowFailed) as err:
        Mirror(load_config(cfg), once=True).run()
    text = str(err.value)
    assert f"{topic}[1] offset" in text and "INVALID_RECORD" in text, text
    assert "exactly-once cannot dead-letter it" in text, text
    # Transactions committed before the refused one stand: each partition holds a prefix of its records,
    # each once, and partition 1 nothing from the refused record on.
    for partition, most in ((0, 20_000), (1, 2)):
        committed = read_partition(bootstraps["B"], f"A.{topic}", partition)
        assert len(committed) <= most and [r.key for r in committed] == [
            f"k{i}".encode() for i in range(len(committed))
        ]
