"""Brokers SIGKILLed mid-stream: the mirror waits and recovers by itself, nothing is lost.

A target broker killed and restarted, and the whole target down for 30 s (each at least once, and
exactly-once: no duplicates either), and (exactly-once) a source broker killed and restarted.

A 3-broker cluster (replication factor 3, ``min.insync.replicas=2``) is started for this module
only: the target of the target-side tests (the source is the session's cluster A), the source of the
last (the target is B). 20,000 records are produced, about 1,000 a second; the target-side tests
produce the first 2,000, wait for the mirror to copy them, and kill brokers (SIGKILL) 3 s into the
rest, so that about 15 s of records still come after the kill. Killed brokers are started again.
Afterwards every source record is on the target, and per partition the first occurrences keep the
source order (duplicates are allowed at least once; their number is printed).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer

from conftest import start_clusters
from kafka_helpers import admin, create_topics, end_offsets, read_partition, unique, wait_for, write_config
from sparkmirror.config import load_config
from sparkmirror.core.naming import progress_group
from sparkmirror.devcluster.cluster import DevClusters
from sparkmirror.pipeline.driver.mirror import Mirror

RECORDS = 20_000
PARTITIONS = 3


@pytest.fixture(scope="module")
def three_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DevClusters, str]]:
    clusters = DevClusters(tmp_path_factory.mktemp("three-brokers"))
    try:
        yield clusters, start_clusters(clusters, ["T"], brokers=3)["T"]
    finally:
        clusters.down()


def _ends(bootstrap: str, topic: str) -> dict[int, int]:
    """End offsets, or nothing while brokers are killed or starting (the caller asks again)."""
    try:
        return end_offsets(bootstrap, topic)
    except KafkaException:
        return {}


def _committed_count(bootstrap: str, topic: str) -> int:
    """Committed records of every partition, or 0 while brokers are killed or starting."""
    try:
        return sum(len(read_partition(bootstrap, topic, p)) for p in range(PARTITIONS))
    except (KafkaException, AssertionError):
        return 0


def _stopped(mirror: Mirror) -> bool:
    """The flow stopped for good (the test's assertion then says why)."""
    return bool(mirror.runners) and mirror.runners[0].failure is not None


def _wait_for_every_record(mirror: Mirror, target: str, remote: str, *, exactly_once: bool, timeout_s: float) -> None:
    """Every produced record on the target (or the mirror stopped, which the caller's assert reports)."""
    if exactly_once:
        # Committed records, not end offsets: those count the transactions' markers too.
        wait_for(
            lambda: _stopped(mirror) or _committed_count(target, remote) >= RECORDS,
            timeout_s=timeout_s,
            what="every record on the target",
            interval_s=5,
        )
    else:
        wait_for(
            lambda: (ends := _ends(target, remote)) and all(n >= RECORDS // PARTITIONS for n in ends.values()),
            timeout_s=timeout_s,
            what="every record on the target",
        )


def _check_copy(source: str, topic: str, target: str, remote: str, *, exactly_once: bool, what: str) -> None:
    """Every source record on the target in source order (first copies); exactly-once: each just once."""
    duplicates = 0
    for p in range(PARTITIONS):
        expected = [r.value for r in read_partition(source, topic, p)]
        mirrored = [r.value for r in read_partition(target, remote, p)]  # read_committed
        if exactly_once:
            assert mirrored == expected, (
                f"partition {p}: {len(set(expected) - set(mirrored))} lost, "
                f"{len(mirrored) - len(set(mirrored))} duplicates"
            )
            continue
        first = list(dict.fromkeys(mirrored))
        assert first == expected, f"partition {p}: {len(set(expected) - set(mirrored))} records lost"
        duplicates += len(mirrored) - len(first)
    print(f"{what} ({'exactly-once' if exactly_once else 'at least once'}): 0 lost, {duplicates} duplicates")


def _produce(bootstrap: str, topic: str, errors: list[object], first: int = 0, until: int = RECORDS) -> None:
    """Records ``first..until-1`` (value: the number), about 1,000 a second, round robin over the partitions."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 10})
    start = time.monotonic()
    for i in range(first, until):
        while True:
            try:
                p.produce(
                    topic,
                    value=f"{i}".encode(),
                    partition=i % PARTITIONS,
                    on_delivery=lambda err, _m: errors.append(err) if err else None,
                )
                break
            except BufferError:
                p.poll(0.05)
        if i % 1000 == 999:  # about 1,000 records a second
            p.poll(0)
            ahead = (i + 1 - first) / 1000 - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
    assert p.flush(120) == 0


#: Records produced before the mirror is seen copying; the rest stream while brokers are killed.
HEAD = 2_000


def _copying_then_stream(
    mirror: Mirror, source: str, topic: str, target: str, remote: str, errors: list[object]
) -> threading.Thread:
    """The first :data:`HEAD` records, then (once the mirror copies them) the rest in a thread, 3 s of
    it before returning: a fault injected next lands mid-stream, with about 15 s of records to come,
    however long the mirror took to start."""
    _produce(source, topic, errors, 0, HEAD)
    wait_for(
        lambda: _stopped(mirror) or sum(_ends(target, remote).values()) >= HEAD,
        timeout_s=180,
        what="the mirror to be copying",
        interval_s=0.5,
    )
    assert mirror.runners[0].failure is None, mirror.runners[0].failure
    producer = threading.Thread(target=_produce, args=(source, topic, errors, HEAD, RECORDS), daemon=True)
    producer.start()
    time.sleep(3)
    return producer


def _group_coordinator(bootstrap: str, group: str) -> int:
    """The broker that coordinates ``group``: the leader of its ``__consumer_offsets`` partition.

    Kafka puts a group in partition ``abs(Java's String.hashCode(group)) % offsets.topic.num.partitions``.
    """
    h = 0
    for ch in group:  # Java's String.hashCode, on 32 bits (the names here are ASCII)
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    md = admin(bootstrap).list_topics("__consumer_offsets", timeout=30).topics["__consumer_offsets"]
    leader = md.partitions[(0 if h == -(1 << 31) else abs(h)) % len(md.partitions)].leader
    assert leader >= 0, f"no leader for the __consumer_offsets partition of {group}"
    return leader


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_target_broker_killed_and_restarted_mid_stream_loses_nothing(
    bootstraps, spark, three_brokers: tuple[DevClusters, str], tmp_path: Path, exactly_once: bool
) -> None:
    """A target broker is SIGKILLed mid-stream and started again 10 s later: at least once, the leader
    of remote partition 0; exactly-once, the coordinator of the flow's progress group (it also leads
    partitions), the broker whose loss left a task waiting for minutes inside librdkafka's
    ``send_offsets_to_transaction`` (issue 14). Every source record is on the target; exactly-once:
    each exactly once, in order (read_committed)."""
    clusters, target = three_brokers
    topic = unique("brokerkill")
    remote = f"A.{topic}"
    create_topics(bootstraps["A"], {topic: PARTITIONS})
    cfg = write_config(
        tmp_path / "mm2.properties", bootstraps["A"], target,
        extra=(
            f"A->B.topics = {topic}\nreplication.factor = 3\ncheckpoints.topic.replication.factor = 3\n"
            "offset-syncs.topic.replication.factor = 3\noffset-syncs.topic.location = target\n"
            + ("sparkmirror.exactly.once = true\n" if exactly_once else "")
        ),
    )  # fmt: skip
    mirror = Mirror(load_config(cfg))
    runner = threading.Thread(target=mirror.run, daemon=True)
    errors: list[object] = []
    runner.start()
    try:
        producer = _copying_then_stream(mirror, bootstraps["A"], topic, target, remote, errors)
        if exactly_once:
            leader = _group_coordinator(target, progress_group("A", "B"))
        else:
            leader = admin(target).list_topics(remote, timeout=30).topics[remote].partitions[0].leader
        clusters.kill_broker("T", leader)
        time.sleep(10)
        clusters.restart_broker("T", leader)
        producer.join(120)
        assert not errors, errors[:3]
        _wait_for_every_record(
            mirror, target, remote, exactly_once=exactly_once, timeout_s=240 if exactly_once else 180
        )
        assert mirror.runners[0].failure is None, mirror.runners[0].failure
    finally:
        mirror.request_stop()
        runner.join(120)
    _check_copy(
        bootstraps["A"],
        topic,
        target,
        remote,
        exactly_once=exactly_once,
        what=f"target broker {leader} killed and restarted",
    )


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_whole_target_down_30s_mid_stream_loses_nothing(
    bootstraps, spark, three_brokers: tuple[DevClusters, str], tmp_path: Path, exactly_once: bool
) -> None:
    """Every broker of the target SIGKILLed mid-stream, started again 30 s later: the flow restarts by
    itself (back-off) and catches up; nothing is lost; exactly-once: nothing is written twice either
    (read back read_committed)."""
    clusters, target = three_brokers
    topic = unique("targetdown")
    remote = f"A.{topic}"
    create_topics(bootstraps["A"], {topic: PARTITIONS})
    cfg = write_config(
        tmp_path / "mm2.properties", bootstraps["A"], target,
        extra=(
            f"A->B.topics = {topic}\nreplication.factor = 3\ncheckpoints.topic.replication.factor = 3\n"
            "offset-syncs.topic.replication.factor = 3\noffset-syncs.topic.location = target\n"
            + ("sparkmirror.exactly.once = true\n" if exactly_once else "")
        ),
    )  # fmt: skip
    mirror = Mirror(load_config(cfg))
    runner = threading.Thread(target=mirror.run, daemon=True)
    errors: list[object] = []
    runner.start()
    try:
        producer = _copying_then_stream(mirror, bootstraps["A"], topic, target, remote, errors)
        clusters.down(["T"], keep_data=True, kill=True)
        time.sleep(30)
        clusters.up(["T"], brokers=3)
        producer.join(120)
        assert not errors, errors[:3]
        _wait_for_every_record(mirror, target, remote, exactly_once=exactly_once, timeout_s=240)
        assert mirror.runners[0].failure is None, mirror.runners[0].failure
    finally:
        mirror.request_stop()
        runner.join(120)
    _check_copy(bootstraps["A"], topic, target, remote, exactly_once=exactly_once, what="whole target down 30 s")


def test_source_broker_killed_mid_stream_exactly_once_loses_and_duplicates_nothing(
    bootstraps, spark, three_brokers: tuple[DevClusters, str], tmp_path: Path
) -> None:
    """The 3-broker cluster as the source: the leader of source partition 0 is SIGKILLed mid-stream and
    started again 10 s later. The mirror (exactly-once) reads from the new leader; the target holds
    every source record exactly once, in order."""
    clusters, source = three_brokers
    topic = unique("srckill")
    remote = f"A.{topic}"
    create_topics(source, {topic: PARTITIONS})
    cfg = write_config(
        tmp_path / "mm2.properties", source, bootstraps["B"],
        extra=f"A->B.topics = {topic}\nsparkmirror.exactly.once = true\n",
    )  # fmt: skip
    mirror = Mirror(load_config(cfg))
    runner = threading.Thread(target=mirror.run, daemon=True)
    errors: list[object] = []
    producer = threading.Thread(target=_produce, args=(source, topic, errors), daemon=True)
    runner.start()
    producer.start()
    try:
        wait_for(
            lambda: sum(_ends(bootstraps["B"], remote).values()) > 2_000,
            timeout_s=120,
            what="the mirror to be copying",
            interval_s=0.5,
        )
        leader = admin(source).list_topics(topic, timeout=30).topics[topic].partitions[0].leader
        clusters.kill_broker("T", leader)
        time.sleep(10)
        clusters.restart_broker("T", leader)
        producer.join(120)
        assert not errors, errors[:3]
        # Committed records, not end offsets: those count the transactions' markers too.
        wait_for(
            lambda: sum(len(read_partition(bootstraps["B"], remote, p)) for p in range(PARTITIONS)) >= RECORDS,
            timeout_s=240,
            what="every record on the target",
            interval_s=5,
        )
        assert mirror.runners[0].failure is None
    finally:
        mirror.request_stop()
        runner.join(120)
    for p in range(PARTITIONS):
        expected = [r.value for r in read_partition(source, topic, p)]
        mirrored = [r.value for r in read_partition(bootstraps["B"], remote, p)]  # read_committed
        assert mirrored == expected, (
            f"partition {p}: {len(set(expected) - set(mirrored))} lost, {len(mirrored) - len(set(mirrored))} duplicates"
        )
    print(f"source broker {leader} killed and restarted (exactly-once): 0 lost, 0 duplicates")
