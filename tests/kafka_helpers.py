"""Test helpers that talk to real clusters: unique names, produce, read back, run the CLI.

Nothing here mocks Kafka; every helper works against real brokers.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from sparkmirror.kafka.factory import close_within

#: How long a helper waits for its consumer to close. After brokers were killed, librdkafka's close can
#: wait on a coordinator or a broker thread for far longer (an open librdkafka issue, #4519); a helper
#: must not turn that into a test run that never ends.
CLOSE_WAIT_S = 30.0


def close_bounded(c: Consumer) -> None:
    """Close a helper's consumer, waiting at most :data:`CLOSE_WAIT_S`: a close that takes longer is
    left behind (the helpers never commit, so nothing is lost) and said."""
    if not close_within(c.close, CLOSE_WAIT_S, "a helper consumer"):
        print(f"a helper consumer did not close within {CLOSE_WAIT_S:.0f}s; left to librdkafka", file=sys.stderr)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topics(bootstrap: str, topics: Mapping[str, int], config: Mapping[str, str] | None = None) -> None:
    client = admin(bootstrap)  # kept alive until the futures resolve
    futures = client.create_topics(
        [NewTopic(t, num_partitions=n, replication_factor=-1, config=dict(config or {})) for t, n in topics.items()],
        operation_timeout=30,
    )
    for f in futures.values():
        f.result(timeout=90)


@dataclass(frozen=True)
class Rec:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def varied_records(partition: int, n: int, first: int = 0) -> list[Rec]:
    """Records ``first`` to ``first + n - 1`` of a partition, recent timestamps, with null keys and values
    and headers (one without a value) here and there: what a copy must keep byte for byte."""
    now = int(time.time() * 1000)
    out = []
    for i in range(first, first + n):
        key = None if i % 7 == 0 else f"k{partition}-{i}".encode()
        value = None if i % 11 == 0 else f"v{partition}-{i}".encode() * (1 + i % 5)
        headers: tuple[tuple[str, bytes | None], ...] = ()
        if i % 3 == 0:
            headers = (("h", f"{i}".encode()), ("empty", None))
        out.append(Rec(key, value, headers, now - 1000 + i))
    return out


def produce(bootstrap: str, topic: str, partition: int, records: Iterable[Rec], **conf: Any) -> None:
    errors: list[Any] = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, **conf})
    for r in records:
        while True:
            try:
                p.produce(
                    topic,
                    key=r.key,
                    value=r.value,
                    partition=partition,
                    timestamp=r.timestamp,
                    headers=list(r.headers) or None,
                    on_delivery=lambda err, _m: errors.append(err) if err else None,
                )
                break
            except BufferError:
                p.poll(0.1)
    assert p.flush(60) == 0
    assert not errors, errors


def read_partition(bootstrap: str, topic: str, partition: int, *, timeout_s: float = 60.0) -> list[Rec]:
    """Every committed record of one partition, from the start to the current end."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("reader"),
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        out: list[Rec] = []
        if high <= low:
            return out
        c.assign([TopicPartition(topic, partition, low)])
        deadline = time.monotonic() + timeout_s
        last = low - 1
        while last < high - 1:
            assert time.monotonic() < deadline, f"{topic}[{partition}] read stalled at {last} of {high}"
            msgs = c.consume(1000, 1.0)
            for m in msgs:
                if m.error():
                    raise AssertionError(f"{topic}[{partition}]: {m.error()}")
                last = m.offset()
                hdrs = tuple((k, v) for k, v in (m.headers() or []))
                out.append(Rec(m.key(), m.value(), hdrs, m.timestamp()[1]))
            if not msgs and c.position([TopicPartition(topic, partition)])[0].offset >= high:
                break
        return out
    finally:
        close_bounded(c)


def committed_log(bootstrap: str, topic: str, partition: int) -> list[tuple[int, bytes]]:
    """(offset, value) of every committed record of one partition, up to where reading finds the end."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("log"),
            "enable.auto.commit": False,  # a reader, not a group that mirrors or failovers should see
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    c.assign([TopicPartition(topic, partition, 0)])
    out: list[tuple[int, bytes]] = []
    try:
        while True:
            msgs = c.consume(5000, 1.0)
            if not msgs:
                return out
            for m in msgs:
                if m.error():
                    return out
                out.append((m.offset(), m.value()))
    finally:
        close_bounded(c)


def partition_count(bootstrap: str, topic: str) -> int:
    md = admin(bootstrap).list_topics(topic, timeout=30).topics.get(topic)
    return 0 if md is None or md.error is not None else len(md.partitions)


_LEADER_MOVING = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        # A leader elected after a broker restart, before its high watermark caught up.
        KafkaError.OFFSET_NOT_AVAILABLE,
    }
)


def end_offsets(bootstrap: str, topic: str, *, settle_s: float = 30.0) -> dict[int, int]:
    """High watermark per partition.

    A topic the replicator has just created can answer NOT_LEADER_FOR_PARTITION
    (or LEADER_NOT_AVAILABLE; OFFSET_NOT_AVAILABLE after a broker restart) for a
    moment while its leaders are elected; such
    retriable answers are asked again for up to `settle_s`, anything else raises.
    """
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("wm")})
    deadline = time.monotonic() + settle_s
    try:
        while True:
            try:
                n = partition_count(bootstrap, topic)
                return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(n)}
            except KafkaException as e:
                err = e.args[0] if e.args else None
                settling = isinstance(err, KafkaError) and (err.retriable() or err.code() in _LEADER_MOVING)
                if not settling or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        close_bounded(c)


def wait_for(predicate: Any, *, timeout_s: float, what: str, interval_s: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(interval_s)


def write_config(path: Path, source: str, target: str, *, extra: str = "") -> Path:
    path.write_text(
        f"""clusters = A, B
A.bootstrap.servers = {source}
B.bootstrap.servers = {target}
A->B.enabled = true
replication.factor = 1
checkpoints.topic.replication.factor = 1
heartbeats.topic.replication.factor = 1
offset-syncs.topic.replication.factor = 1
emit.checkpoints.interval.seconds = 2
# Heartbeats are replicated whatever `topics` says (MM2's rule); tests that
# count records keep them out, the heartbeat test turns them back on.
emit.heartbeats.enabled = false
heartbeats.replication.enabled = false
sparkmirror.progress.interval.seconds = 2
{extra}
"""
    )
    return path


def sparkmirror_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "sparkmirror", *args]


def run_cli(
    *args: str, timeout_s: float = 600, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        sparkmirror_cmd(*args),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, **(env or {})},
        check=False,
    )


def commit_group(bootstrap: str, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
    """Commit a group's offsets, check they read back, and wait until the coordinator lists
    the group (the mirror finds groups by listing them, as MM2 does)."""
    from sparkmirror.kafka.groups import commit_offsets, committed_offsets

    commit_offsets({"bootstrap.servers": bootstrap}, group, offsets)
    assert committed_offsets({"bootstrap.servers": bootstrap}, group, list(offsets)) == dict(offsets)
    client = admin(bootstrap)
    wait_for(
        lambda: group in {g.group_id for g in client.list_consumer_groups(request_timeout=30).result().valid},
        timeout_s=60,
        what=f"group {group} to be listed",
        interval_s=0.5,
    )


@contextmanager
def running_mirror(config_path: Path) -> Iterator[list[BaseException]]:
    """``Mirror.run`` of ``config_path`` in a thread of this process (the session's Spark); yields the
    list its error lands in. On leaving: a stop as SIGTERM asks (after the batch), and the run must
    have ended without an error."""
    from sparkmirror.config import load_config
    from sparkmirror.pipeline.driver.mirror import Mirror

    mirror = Mirror(load_config(config_path))
    errors: list[BaseException] = []

    def run() -> None:
        try:
            mirror.run()
        except BaseException as exc:  # surfaced by the assertions below
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield errors
    finally:
        mirror.request_stop()
        thread.join(120)
    assert not thread.is_alive(), "the mirror did not stop within 120 s"
    assert not errors, errors


def free_port() -> int:
    """A free TCP port below the ephemeral range."""
    for _ in range(100):
        port = random.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port")


def scrape_metrics(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Every sample of a Prometheus endpoint: name -> [(labels, value)]."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out
