"""No data loss when the mirror process is SIGKILLed repeatedly under load.

While 100,000 records are produced to A, `sparkmirror run` is killed with
SIGKILL three times at random moments and started again. Afterwards every
source record is on B, per-partition order of first occurrences equals the
source order, and the number of duplicates (allowed at least once) is printed.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

from confluent_kafka import Producer

from kafka_helpers import (
    create_topics,
    end_offsets,
    read_partition,
    run_cli,
    sparkmirror_cmd,
    unique,
    wait_for,
    write_config,
)
from sparkmirror.config import load_config
from sparkmirror.kafka.groups import commit_offsets

RECORDS = 100_000
#: sparkmirror.batch.max.records: records a task may hold written but not durable (at least once).
BATCH = 1000
PARTITIONS = 4


def _producer_thread(
    bootstrap: str, topic: str, done: threading.Event, hurry: threading.Event, errors: list[object]
) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 10})
    start = time.monotonic()
    for i in range(RECORDS):
        while True:
            try:
                p.produce(
                    topic,
                    key=f"k{i}".encode(),
                    value=f"{i}".encode(),
                    partition=i % PARTITIONS,
                    on_delivery=lambda err, _m: errors.append(err) if err else None,
                )
                break
            except BufferError:
                p.poll(0.05)
        # 1,000 records a second until the last kill has been sent (so every kill lands
        # mid-stream, however long the runs take to start), then the rest at once.
        if i % 1000 == 999:
            p.poll(0)
            ahead = (i + 1) / 1000 - (time.monotonic() - start)
            if ahead > 0:
                hurry.wait(ahead)
    p.flush(120)
    done.set()


def test_sigkill_three_times_loses_nothing(bootstraps, tmp_path: Path) -> None:
    topic = unique("killed")
    create_topics(bootstraps["A"], {topic: PARTITIONS})
    cfg = write_config(
        tmp_path / "mm2.properties",
        bootstraps["A"],
        bootstraps["B"],
        extra=f"A->B.topics = {topic}\nsparkmirror.batch.max.records = {BATCH}\n",
    )
    done, hurry = threading.Event(), threading.Event()
    errors: list[object] = []
    producer = threading.Thread(
        target=_producer_thread, args=(bootstraps["A"], topic, done, hurry, errors), daemon=True
    )
    producer.start()
    rng = random.Random(int(os.environ.get("SPARKMIRROR_TEST_SEED", "0")) or None)
    log = tmp_path / "run.log"
    kills = 0
    with log.open("ab") as out:
        while kills < 3:
            proc = subprocess.Popen(sparkmirror_cmd("run", str(cfg)), stdout=out, stderr=subprocess.STDOUT)
            # Kill at a random moment after this run has written something.
            before = sum(end_offsets(bootstraps["B"], f"A.{topic}").values())
            wait_for(
                lambda before=before: sum(end_offsets(bootstraps["B"], f"A.{topic}").values()) > before,
                timeout_s=120,
                what="this run to write to B",
                interval_s=0.5,
            )
            time.sleep(rng.uniform(0, 8))
            assert proc.poll() is None, f"sparkmirror run exited early; see {log}:\n{log.read_text()[-3000:]}"
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
            kills += 1
            print(f"SIGKILL #{kills} sent (producer done: {done.is_set()})")
    hurry.set()
    producer.join(300)
    assert done.is_set() and not errors, errors

    # One last run to catch up; --once stops when what A holds now is on B.
    result = run_cli("run", str(cfg), "--once", timeout_s=600)
    assert result.returncode == 0, result.stdout + result.stderr

    duplicates = 0
    for p in range(PARTITIONS):
        expected = [str(i).encode() for i in range(p, RECORDS, PARTITIONS)]
        got = [r.value for r in read_partition(bootstraps["B"], f"A.{topic}", p)]
        first_seen: list[bytes] = []
        seen: set[bytes] = set()
        for v in got:
            if v in seen:
                duplicates += 1
                continue
            seen.add(v)
            first_seen.append(v)
        missing = len(set(expected) - seen)
        assert missing == 0, f"A.{topic}[{p}] lost {missing} records"
        assert first_seen == expected, f"A.{topic}[{p}]: order of first occurrences differs from the source"
    print(f"records={RECORDS} kills={kills} lost=0 duplicates={duplicates}")
    flow = load_config(cfg).flows[0]
    # A kill copies again at most what each task wrote since its last durable commit (docs/faults.md):
    # caught up, one commit interval of the load (1,000 records/s) and the commit's own round trips;
    # catching up the backlog of the restart, sparkmirror.batch.max.records.
    tasks = os.cpu_count() or 1
    bound = kills * max(int(1000 * (flow.commit_interval_ms / 1000 + 1.0)), tasks * BATCH)
    assert duplicates <= bound, f"{duplicates} duplicates after {kills} kills, above the bound {bound}"

    # Translation stays exact after at-least-once replays: a group stopped at
    # random positions on A translates (`sparkmirror offsets translate`) to the
    # last copy of its next record on B - zero re-reads, no loss.
    group = unique("after-replays")
    positions = {(topic, p): rng.randrange(0, RECORDS // PARTITIONS) for p in range(PARTITIONS)}
    commit_offsets({"bootstrap.servers": bootstraps["A"]}, group, positions)
    result = run_cli("offsets", "translate", str(cfg), "--source", "A", "--target", "B", "--group", group, "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["positions_from"] == "source"
    got = {(r["source_topic"], r["partition"]): r["target_offset"] for r in report["partitions"]}
    for (t, p), g in positions.items():
        values = [r.value for r in read_partition(bootstraps["B"], f"A.{t}", p)]
        # Source offset g holds value str(p + g * PARTITIONS) (one producer, round-robin partitions).
        want = max(i for i, v in enumerate(values) if v == str(p + g * PARTITIONS).encode())
        assert got[(t, p)] == want, f"A.{t}[{p}] group at {g}: translated {got[(t, p)]}, true {want}"
