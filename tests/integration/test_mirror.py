"""A->B mirroring on real brokers and a real (embedded) Spark.

Records keep key, value (null keys and tombstones too), headers, timestamp,
partition and order; topics and partitions that appear while the job runs are
picked up.
"""

from __future__ import annotations

import time
from pathlib import Path

from kafka_helpers import (
    Rec,
    create_topics,
    end_offsets,
    partition_count,
    produce,
    read_partition,
    running_mirror,
    unique,
    wait_for,
    write_config,
)
from sparkmirror.config import load_config
from sparkmirror.pipeline.driver.mirror import Mirror

# Explicit timestamps, recent enough that the brokers' 7-day retention keeps them.
_BASE_TS = int(time.time() * 1000) - 3_600_000


def _records(topic: str, partition: int, n: int) -> list[Rec]:
    out = []
    for i in range(n):
        key = None if i % 7 == 0 else f"{topic}/{partition}/k{i}".encode()
        value = None if i % 11 == 3 else bytes([i % 256, partition]) + f"v{i}".encode() + b"\x00\xff"
        headers: tuple[tuple[str, bytes | None], ...] = ()
        if i % 3 == 0:
            headers = (("h1", f"{i}".encode()), ("dup", b"a"), ("dup", b"b"), ("nullh", None))
        out.append(Rec(key, value, headers, _BASE_TS + partition * 1000 + i * 3))
    return out


def test_mirrors_records_byte_for_byte_into_same_partitions(bootstraps, spark, tmp_path: Path):
    prefix = unique("bytes")
    topics = {f"{prefix}.t{i}": 4 for i in range(3)}
    create_topics(bootstraps["A"], topics)
    sent = {}
    for t in topics:
        for p in range(4):
            sent[(t, p)] = _records(t, p, 50 + 10 * p)
            produce(bootstraps["A"], t, p, sent[(t, p)])

    cfg = write_config(
        tmp_path / "mm2.properties",
        bootstraps["A"],
        bootstraps["B"],
        extra=f"A->B.topics = {prefix}\\..*\n",
    )
    runners = Mirror(load_config(cfg), once=True).run()
    assert runners[0].progress.records == sum(len(v) for v in sent.values())
    assert runners[0].progress.lag == 0

    for (t, p), records in sent.items():
        remote = f"A.{t}"
        assert partition_count(bootstraps["B"], remote) == 4
        got = read_partition(bootstraps["B"], remote, p)
        assert got == records, f"{remote}[{p}] differs from {t}[{p}]"


def test_picks_up_new_topics_and_partitions_while_running(bootstraps, spark, tmp_path: Path):
    prefix = unique("grow")
    first, second = f"{prefix}.first", f"{prefix}.second"
    create_topics(bootstraps["A"], {first: 2})
    produce(bootstraps["A"], first, 0, _records(first, 0, 20))
    cfg = write_config(
        tmp_path / "mm2.properties",
        bootstraps["A"],
        bootstraps["B"],
        extra=f"A->B.topics = {prefix}\\..*\nrefresh.topics.interval.seconds = 2\n",
    )
    with running_mirror(cfg) as errors:
        wait_for(
            lambda: end_offsets(bootstraps["B"], f"A.{first}").get(0) == 20,
            timeout_s=120,
            what="the first topic to be mirrored",
        )

        # A topic created while the job runs.
        create_topics(bootstraps["A"], {second: 3})
        produce(bootstraps["A"], second, 2, _records(second, 2, 15))
        wait_for(
            lambda: end_offsets(bootstraps["B"], f"A.{second}").get(2) == 15,
            timeout_s=120,
            what="the new topic to be mirrored",
        )

        # A partition added on the source.
        from confluent_kafka.admin import NewPartitions

        from kafka_helpers import admin

        client = admin(bootstraps["A"])
        for f in client.create_partitions([NewPartitions(first, 4)]).values():
            f.result()
        produce(bootstraps["A"], first, 3, _records(first, 3, 12))
        wait_for(
            lambda: end_offsets(bootstraps["B"], f"A.{first}").get(3) == 12,
            timeout_s=120,
            what="the new partition to be mirrored",
        )
        assert partition_count(bootstraps["B"], f"A.{first}") == 4
        assert read_partition(bootstraps["B"], f"A.{first}", 3) == _records(first, 3, 12)
        assert not errors, errors
