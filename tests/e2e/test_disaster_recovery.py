"""Disaster recovery end to end: A is lost, the group fails over to B, A returns, the group fails back.

Cluster A holds a plain topic (50,000 records in 4 partitions), a compacted topic (gaps all
through its log) and a transactional topic (committed and aborted transactions). A consumer
group processes part of each on A and commits. sparkmirror mirrors A to B and checkpoints the
group; then A's brokers are killed. ``failover --execute`` moves the group to B from what B
holds; a consumer with the same group on B reads the rest. What the group processed on A and on
B together is every record exactly once (zero loss, zero re-reads).

Then, while A is down, producers write to B; the group reads part of that too. A comes back
with its data, a B->A flow copies what was produced on B, and ``failback --execute`` moves the
group to A: its positions in B's copies of A's topics map back through the inverse of the A->B
offset map, its position in B's own topic through the B->A map. The group on A then reads
exactly what it had not processed.

These clusters are this module's own (A is killed), not the session's.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from kafka_helpers import (
    commit_group,
    committed_log,
    create_topics,
    run_cli,
    sparkmirror_cmd,
    unique,
    wait_for,
    write_config,
)
from sparkmirror.core.formats import Checkpoint
from sparkmirror.kafka.internal import read_to_end

PLAIN, COMPACT, TXN = "orders", "accounts", "payments"
PLAIN_PARTITIONS = 4
PLAIN_RECORDS = 50_000
GROUP = "billing"


@pytest.fixture(scope="module")
def dr(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[object, dict[str, str]]]:
    from conftest import start_clusters
    from sparkmirror.devcluster.cluster import DevClusters

    clusters = DevClusters(tmp_path_factory.mktemp("dr-clusters"))
    boots = start_clusters(clusters, ["A", "B"])
    yield clusters, boots
    clusters.down()


def _load_source(bootstrap: str) -> None:
    create_topics(bootstrap, {PLAIN: PLAIN_PARTITIONS})
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 10})
    for i in range(PLAIN_RECORDS):
        while True:
            try:
                p.produce(PLAIN, key=f"k{i}".encode(), value=f"p{i}".encode(), partition=i % PLAIN_PARTITIONS)
                break
            except BufferError:
                p.poll(0.05)
    create_topics(
        bootstrap,
        {COMPACT: 1},
        config={
            "cleanup.policy": "compact",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": "0",
            "delete.retention.ms": "100",
        },
    )
    for i in range(600):
        p.produce(COMPACT, key=(f"a{i}" if i % 2 == 0 else "shared").encode(), value=f"c{i}".encode(), partition=0)
    assert p.flush(60) == 0
    time.sleep(1.0)
    p.produce(COMPACT, key=b"roll", value=b"roll", partition=0)  # rolls the segment so it can be cleaned
    assert p.flush(60) == 0
    wait_for(lambda: len(committed_log(bootstrap, COMPACT, 0)) < 601, timeout_s=120, what=f"{COMPACT} to be compacted")

    create_topics(bootstrap, {TXN: 1})
    tx = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("payments-tx")})
    tx.init_transactions(60)
    for k in range(6):
        tx.begin_transaction()
        for i in range(50):
            tx.produce(TXN, value=f"t{k}-{i}".encode(), partition=0)
        tx.flush(30)
        (tx.abort_transaction if k % 3 == 1 else tx.commit_transaction)(30)


def _consume_group(bootstrap: str, topics: list[str], *, until_idle_s: float = 8.0) -> set[bytes]:
    """Read as group GROUP from its committed offsets to the end, commit, and return what it read."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            # The group must resume from the moved offsets: "latest" would hide a missing commit.
            "auto.offset.reset": "error",
        }
    )
    seen: list[bytes] = []
    c.subscribe(topics)
    idle_since = time.monotonic()
    try:
        while time.monotonic() - idle_since < until_idle_s:
            msgs = c.consume(5000, 1.0)
            for m in msgs:
                assert m.error() is None, f"{m.topic()}[{m.partition()}]: {m.error()}"
                seen.append(m.value())
            if msgs:
                idle_since = time.monotonic()
                c.commit(asynchronous=False)
    finally:
        c.close()
    assert len(seen) == len(set(seen)), "the group read a record twice in one session"
    return set(seen)


def _checkpointed(bootstrap: str) -> dict[tuple[str, int], int]:
    out = {}
    for key, value in read_to_end({"bootstrap.servers": bootstrap}, "A.checkpoints.internal"):
        if key is not None and value is not None:
            cp = Checkpoint.decode(key, value)
            if cp.group == GROUP:
                out[(cp.topic, cp.partition)] = cp.upstream_offset
    return out


def _failover_cli(command: str, cfg: Path, source: str, target: str, *extra: str) -> dict:
    result = run_cli(command, str(cfg), "--source", source, "--target", target, "--json", *extra, timeout_s=300)
    assert result.returncode == 0, (
        f"{command} exit {result.returncode}:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    )
    return json.loads(result.stdout)


def test_disaster_recovery_failover_then_failback(dr, tmp_path: Path) -> None:
    clusters, boots = dr
    _load_source(boots["A"])
    source_logs = {
        (t, p): committed_log(boots["A"], t, p)
        for t, n in ((PLAIN, PLAIN_PARTITIONS), (COMPACT, 1), (TXN, 1))
        for p in range(n)
    }
    # The group processed 20,000 of the plain records (5,000 per partition), half of the
    # compacted log (stopping on a removed offset) and the transactional topic up to a marker.
    positions: dict[tuple[str, int], int] = {(PLAIN, p): 5_000 for p in range(PLAIN_PARTITIONS)}
    compact_offsets = [o for o, _v in source_logs[(COMPACT, 0)]]
    half = len(compact_offsets) // 2
    positions[(COMPACT, 0)] = next(
        o + 1 for o, nxt in zip(compact_offsets[half:], compact_offsets[half + 1 :], strict=False) if nxt > o + 1
    )
    txn_offsets = [o for o, _v in source_logs[(TXN, 0)]]
    positions[(TXN, 0)] = txn_offsets[49] + 1  # the first transaction's commit marker
    processed_on_a = {v for tp, log in source_logs.items() for o, v in log if o < positions[tp]}
    assert sum(1 for v in processed_on_a if v.startswith(b"p")) == 20_000
    commit_group(boots["A"], GROUP, positions)

    cfg = write_config(
        tmp_path / "mm2.properties",
        boots["A"],
        boots["B"],
        extra=f"A->B.topics = {PLAIN}, {COMPACT}, {TXN}\n",
    )
    log_path = tmp_path / "run.log"
    with log_path.open("ab") as out:
        mirror = subprocess.Popen(sparkmirror_cmd("run", str(cfg)), stdout=out, stderr=subprocess.STDOUT)
    try:
        remote = {(f"A.{t}", p): [v for _o, v in log] for (t, p), log in source_logs.items()}

        def caught_up() -> bool:
            assert mirror.poll() is None, f"sparkmirror run exited; see {log_path}:\n{log_path.read_text()[-3000:]}"
            return all({v for _o, v in committed_log(boots["B"], t, p)} >= set(vs) for (t, p), vs in remote.items())

        wait_for(caught_up, timeout_s=300, what="B to hold every record of A", interval_s=3)
        wait_for(
            lambda: _checkpointed(boots["B"]) == {(f"A.{t}", p): o for (t, p), o in positions.items()},
            timeout_s=120,
            what="checkpoints of the group's final positions",
            interval_s=2,
        )
        # Disaster: A's brokers die.
        clusters.down(["A"], kill=True, keep_data=True)  # type: ignore[attr-defined]
    finally:
        mirror.send_signal(signal.SIGKILL)
        mirror.wait(60)

    # The plan (no --execute) comes from B alone and says so.
    plan = _failover_cli("failover", cfg, "A", "B")
    assert plan["origin_reachable"] is False and plan["positions_from"] == "checkpoints"
    assert plan["executed"] is None and {m["action"] for m in plan["moves"]} == {"commit"}
    assert any("does not answer" in n for n in plan["notes"])

    done = _failover_cli("failover", cfg, "A", "B", "--execute")
    assert done["executed"] == len(positions)
    again = _failover_cli("failover", cfg, "A", "B", "--execute")  # safe to run twice
    assert again["executed"] == 0 and {m["action"] for m in again["moves"]} == {"unchanged"}

    processed_on_b = _consume_group(boots["B"], [f"A.{PLAIN}", f"A.{COMPACT}", f"A.{TXN}"])
    assert not processed_on_a & processed_on_b, f"{len(processed_on_a & processed_on_b)} records re-read on B"
    everything = {v for log in source_logs.values() for _o, v in log}
    lost = everything - processed_on_a - processed_on_b
    assert not lost, f"{len(lost)} records never processed, e.g. {sorted(lost)[:5]}"
    assert processed_on_a | processed_on_b == everything

    # While A is down, producers write to B's own topic; the group reads 2,000 of 5,000.
    create_topics(boots["B"], {PLAIN: 1})
    p = Producer({"bootstrap.servers": boots["B"], "acks": "all", "enable.idempotence": True})
    for i in range(5_000):
        p.produce(PLAIN, key=f"b{i}".encode(), value=f"b{i}".encode(), partition=0)
    assert p.flush(60) == 0
    commit_group(boots["B"], GROUP, {(PLAIN, 0): 2_000})
    processed_on_b |= {f"b{i}".encode() for i in range(2_000)}

    # A returns with its data; the B->A flow copies what B got meanwhile.
    clusters.up(["A"])  # type: ignore[attr-defined]
    cfg2 = write_config(
        tmp_path / "mm2-both.properties",
        boots["A"],
        boots["B"],
        extra=f"A->B.topics = {PLAIN}, {COMPACT}, {TXN}\nB->A.enabled = true\nB->A.topics = {PLAIN}\n",
    )
    result = run_cli("run", str(cfg2), "--once", timeout_s=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    back = _failover_cli("failback", cfg2, "B", "A", "--execute")
    by_topic = {(m["origin_topic"], m["partition"]): m for m in back["moves"]}
    assert by_topic[(f"A.{PLAIN}", 0)]["destination_topic"] == PLAIN
    assert by_topic[(f"A.{PLAIN}", 0)]["via"].startswith("reverse")
    assert by_topic[(PLAIN, 0)]["destination_topic"] == f"B.{PLAIN}"
    assert by_topic[(PLAIN, 0)]["via"].startswith("forward")
    # Every A record was processed already: the group ends on A at the exact end of each topic.
    for (t, part), log in source_logs.items():
        end = log[-1][0] + 1 if log else 0
        got = by_topic[(f"A.{t}", part)]["destination_offset"]
        assert got >= end and got <= end + (1 if t == TXN else 0), f"{t}[{part}]: failback to {got}, end {end}"

    processed_on_a_again = _consume_group(boots["A"], [PLAIN, COMPACT, TXN, f"B.{PLAIN}"])
    assert processed_on_a_again == {f"b{i}".encode() for i in range(2_000, 5_000)}, (
        f"after failback the group read {len(processed_on_a_again)} records on A; expected the 3,000 it had not "
        "processed on B"
    )
