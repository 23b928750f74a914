"""Exactly-once mirroring: zero duplicates and zero loss through crashes.

Source records are produced partly inside transactions, some of which abort.
The `sparkmirror run` process is SIGKILLed four times (three on the Java
transport) at random moments and restarted; a task fails mid-transaction; the Spark checkpoint is deleted
between runs. Afterwards a read_committed consumer on B sees every committed
source record exactly once, in source order per partition, and no aborted one.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kafka_helpers import (
    admin,
    create_topics,
    read_partition,
    run_cli,
    sparkmirror_cmd,
    unique,
    wait_for,
    write_config,
)

PARTITIONS = 6
EOS = "exactly.once.source.support = enabled\nsparkmirror.batch.max.records = 20000\n"


def _produce(
    bootstrap: str,
    topic: str,
    total: int,
    *,
    rate: float,
    seed: int,
    committed: dict[int, list[bytes]],
    errors: list[object],
    first: int = 0,
) -> None:
    """Plain records and transactions (about one in four aborted), spread over time."""
    rng = random.Random(seed)
    plain = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 10})
    tx = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("tx-src"), "linger.ms": 10})
    tx.init_transactions(60)
    start = time.monotonic()
    i = first
    total += first

    def send(p: Producer, n: int, keep: bool) -> None:
        nonlocal i
        for _ in range(n):
            part = i % PARTITIONS
            value = f"{i}".encode()
            while True:
                try:
                    p.produce(
                        topic,
                        value=value,
                        key=str(i).encode(),
                        partition=part,
                        on_delivery=lambda err, _m: errors.append(err) if err else None,
                    )
                    break
                except BufferError:
                    p.poll(0.05)
            if keep:
                committed[part].append(value)
            i += 1

    while i < total:
        n = min(rng.randint(50, 500), total - i)
        kind = rng.random()
        if kind < 0.5:
            send(plain, n, True)
            plain.poll(0)
        else:
            tx.begin_transaction()
            abort = kind < 0.625
            send(tx, n, not abort)
            tx.flush(60)  # the aborted records really reach the log
            if abort:
                tx.abort_transaction(60)
            else:
                tx.commit_transaction(60)
        ahead = (i - first) / rate - (time.monotonic() - start)
        if ahead > 0:
            time.sleep(ahead)
    plain.flush(120)


def _assert_exactly_once(bootstraps: dict[str, str], topic: str, committed: dict[int, list[bytes]]) -> None:
    for p in range(PARTITIONS):
        # Source order is the log's order (two producers interleave), read committed.
        source = [r.value for r in read_partition(bootstraps["A"], topic, p, timeout_s=180)]
        assert sorted(source) == sorted(committed[p]), "the test's own bookkeeping is off"
        got = [r.value for r in read_partition(bootstraps["B"], f"A.{topic}", p, timeout_s=180)]
        dupes = len(got) - len(set(got))
        missing = len(set(committed[p]) - set(got))
        assert dupes == 0, f"A.{topic}[{p}]: {dupes} duplicates"
        assert missing == 0, f"A.{topic}[{p}]: {missing} records lost"
        assert got == source, f"A.{topic}[{p}]: order differs or aborted records leaked"


@pytest.mark.parametrize(
    ("transport", "kills", "records"),
    [("librdkafka", 4, 160_000), ("java", 2, 80_000), ("java-writes", 2, 80_000)],
)
def test_sigkill_repeatedly_no_duplicates_no_loss(
    bootstraps, tmp_path: Path, transport: str, kills: int, records: int
) -> None:
    """Also with the tasks' Java clients (``sparkmirror.transport = java``) and with librdkafka reading
    and Java's producers writing (``java-writes``): a killed run leaves its transport JVM behind, serving
    no task, and the next run's tasks fence its transactions (two kills there, each of them leaving a JVM
    behind: what four prove of the sink and the commit is the same code on either client)."""
    topic = unique("eos")
    create_topics(bootstraps["A"], {topic: PARTITIONS})
    cfg = write_config(
        tmp_path / "mm2.properties",
        bootstraps["A"],
        bootstraps["B"],
        extra=f"A->B.topics = {topic}\n{EOS}sparkmirror.transport = {transport}\n",
    )
    committed: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    errors: list[object] = []
    seed = int(os.environ.get("SPARKMIRROR_TEST_SEED", "0")) or random.randrange(1 << 30)
    print(f"seed={seed}")
    producer = threading.Thread(
        target=_produce,
        args=(bootstraps["A"], topic, records),
        kwargs={"rate": 2500.0, "seed": seed, "committed": committed, "errors": errors},
        daemon=True,
    )
    producer.start()
    rng = random.Random(seed)
    log = tmp_path / "run.log"
    with log.open("ab") as out:
        for kill in range(kills):
            launched = _copies_launched(log, transport)
            proc = subprocess.Popen(sparkmirror_cmd("run", str(cfg)), stdout=out, stderr=subprocess.STDOUT)
            # killed mid-copy: after the run launched its tasks (a slow host's start can take 20 s and more)
            wait_for(
                lambda n=launched, p=proc: _copies_launched(log, transport) > n or p.poll() is not None,
                timeout_s=180,
                what=f"run #{kill + 1} to launch its copy",
            )
            time.sleep(rng.uniform(2, 12))
            assert proc.poll() is None, f"sparkmirror run exited early:\n{log.read_text()[-3000:]}"
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
            print(f"SIGKILL #{kill + 1}")
    producer.join(600)
    assert not producer.is_alive() and not errors, errors

    result = run_cli("run", str(cfg), "--once", timeout_s=900)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "mode=exactly-once" in result.stderr
    # Every killed run had started its copy (its tasks on these clients) before it was killed.
    started = _copies_launched(log, transport)
    assert started >= kills, f"{started} of {kills} killed runs had started their copy"
    _assert_exactly_once(bootstraps, topic, committed)
    print(f"records={sum(len(v) for v in committed.values())} committed, kills={kills}, duplicates=0, lost=0")


def _copies_launched(log: Path, transport: str) -> int:
    """How many times the runs logged so far launched their copy tasks on ``transport``'s clients."""
    return log.read_text(errors="replace").count(f"(clients: {transport})")


def test_task_failure_mid_transaction_and_a_second_run_leave_no_duplicate(bootstraps, tmp_path: Path) -> None:
    topic = unique("eos-fail")
    create_topics(bootstraps["A"], {topic: PARTITIONS})
    committed: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    errors: list[object] = []
    _produce(bootstraps["A"], topic, 6_000, rate=1e9, seed=7, committed=committed, errors=errors)
    assert not errors
    cfg = write_config(
        tmp_path / "mm2.properties",
        bootstraps["A"],
        bootstraps["B"],
        extra=f"A->B.topics = {topic}\n{EOS}",
    )
    # Every task's first attempt dies after writing 300 records inside its
    # transaction (flushed to the target, not committed).
    result = run_cli("run", str(cfg), "--once", env={"SPARKMIRROR_TEST_FAIL_AFTER_RECORDS": "300"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "injected task failure" in result.stderr
    _assert_exactly_once(bootstraps, topic, committed)

    # More data, and another run: the target's progress rules (nothing is kept on the host).
    _produce(bootstraps["A"], topic, 3_000, rate=1e9, seed=8, committed=committed, errors=errors, first=6_000)
    result = run_cli("run", str(cfg), "--once")
    assert result.returncode == 0, result.stderr[-3000:]
    _assert_exactly_once(bootstraps, topic, committed)


def _zombie(bootstrap: str, transactional_id: str, topic: str, partition: int, progress: int) -> Producer:
    """A writer of an earlier run that is still alive: its transaction holds a record and a progress far
    ahead on the target, open (a commit would put the record on B and make the mirror skip records)."""
    from confluent_kafka import Consumer, TopicPartition

    from sparkmirror.core.naming import progress_group

    zombie = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "transaction.timeout.ms": 900_000}
    )
    zombie.init_transactions(60)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie", partition=partition)
    assert zombie.flush(60) == 0
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": progress_group("A", "B")})
    try:
        md = group.consumer_group_metadata()
        zombie.send_offsets_to_transaction([TopicPartition(topic, partition, progress)], md, 60)
    finally:
        group.close()
    return zombie


@pytest.mark.parametrize("change", ["upgrade-from-per-partition-ids", "fewer-groups"])
def test_a_start_fences_the_ids_of_an_earlier_transaction_layout(bootstraps, tmp_path: Path, change: str) -> None:
    """The transactional id that writes a partition changes with the layout (``sparkmirror.exactly.once.
    transactions``); a start must still fence the id that wrote it before, or that writer's open
    transaction blocks the progress read and could commit after the mirror read its floor. Before:
    the per-partition ids of an earlier version (nothing recorded on the target), or 4 groups; after:
    the default groups, or 3. The zombie's commit must be refused and B hold each record once."""
    from confluent_kafka import KafkaException

    from sparkmirror.core.naming import transactional_id, transactions_group
    from sparkmirror.core.transactions import group_transactional_id, transaction_group

    topic = unique("eos-layout")
    remote = f"A.{topic}"
    create_topics(bootstraps["A"], {topic: PARTITIONS})
    committed: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    errors: list[object] = []
    _produce(bootstraps["A"], topic, 3_000, rate=1e9, seed=16, committed=committed, errors=errors)

    def config(transactions: int | None) -> Path:
        extra = f"A->B.topics = {topic}\n{EOS}"
        if transactions is not None:
            extra += f"sparkmirror.exactly.once.transactions = {transactions}\n"
        return write_config(tmp_path / "mm2.properties", bootstraps["A"], bootstraps["B"], extra=extra)  # fmt: skip

    if change == "upgrade-from-per-partition-ids":
        # What the version before transaction groups left: the remote topic, no layout on record (the
        # session's other A->B runs recorded theirs).
        create_topics(bootstraps["B"], {remote: PARTITIONS})
        target = admin(bootstraps["B"])
        for future in target.delete_consumer_groups([transactions_group("A", "B")], request_timeout=30).values():
            try:
                future.result()
            except KafkaException as exc:
                assert "GROUP_ID_NOT_FOUND" in str(exc), exc
        old_id, after = transactional_id("A", "B", topic, 2), None
    else:
        result = run_cli("run", str(config(4)), "--once", timeout_s=600)
        assert result.returncode == 0, result.stderr[-3000:]
        old_id, after = group_transactional_id("A", "B", transaction_group(topic, 2, 4), 4), 3
    zombie = _zombie(bootstraps["B"], old_id, remote, 2, 10**9)

    _produce(bootstraps["A"], topic, 2_000, rate=1e9, seed=17, committed=committed, errors=errors, first=3_000)
    assert not errors
    started = time.monotonic()
    # Unfenced, the zombie's pending offsets would hold the progress read until its 15-minute timeout.
    result = run_cli("run", str(config(after)), "--once", timeout_s=420)
    assert result.returncode == 0, result.stderr[-3000:]
    print(f"{change}: run --once took {time.monotonic() - started:.0f} s")
    with pytest.raises(KafkaException, match="FENCED|fenced|INVALID_PRODUCER_EPOCH|PRODUCER_FENCED"):
        zombie.commit_transaction(30)
    _assert_exactly_once(bootstraps, topic, committed)
