"""Operating a live run: Prometheus metrics scraped from `run`, and `sparkmirror status` read from
the clusters while the mirror runs and after it stopped."""

from __future__ import annotations

import json
import time
from pathlib import Path

from kafka_helpers import (
    Rec,
    commit_group,
    create_topics,
    end_offsets,
    free_port,
    produce,
    run_cli,
    running_mirror,
    scrape_metrics,
    unique,
    wait_for,
    write_config,
)


def _sum(samples: dict[str, list[tuple[dict[str, str], float]]], name: str, topics: set[str]) -> float:
    return sum(v for labels, v in samples.get(name, []) if labels.get("topic") in topics)


def _records(n: int, age_s: float, size: int = 40) -> list[Rec]:
    ts = int((time.time() - age_s) * 1000)
    return [Rec(f"k{i}".encode(), b"v" * size, (), ts + i) for i in range(n)]


def test_metrics_and_status_follow_a_live_run(bootstraps, spark, tmp_path: Path):
    prefix = unique("ops")
    topics = {f"{prefix}.a": 2, f"{prefix}.b": 1}
    create_topics(bootstraps["A"], topics)
    sent = {(t, p): 40 + 15 * p for t, n in topics.items() for p in range(n)}
    for (t, p), n in sent.items():
        produce(bootstraps["A"], t, p, _records(n, age_s=5))
    group = unique("ops-group")
    commit_group(bootstraps["A"], group, {(f"{prefix}.a", 0): 20})
    port = free_port()
    cfg = write_config(
        tmp_path / "mm2.properties",
        bootstraps["A"],
        bootstraps["B"],
        extra=(
            f"A->B.topics = {prefix}\\..*\nA->B.groups = {group}\n"
            f"sparkmirror.metrics.port = {port}\nsparkmirror.metrics.host = 127.0.0.1\n"
        ),
    )
    remote = {f"A.{t}" for t in topics}
    total = sum(sent.values())
    with running_mirror(cfg) as errors:
        wait_for(
            lambda: sum(sum(end_offsets(bootstraps["B"], r).values()) for r in remote) == total,
            timeout_s=180,
            what="every record on B",
        )

        # Counted where the records were acknowledged: exactly what was produced, per partition too.
        def counted() -> dict[str, list[tuple[dict[str, str], float]]] | None:
            s = scrape_metrics(port)
            return s if _sum(s, "sparkmirror_record_count_total", remote) == total else None

        samples = wait_for(counted, timeout_s=30, what="the record count to reach the records produced")
        for (t, p), n in sent.items():
            want = {"source": "A", "target": "B", "topic": f"A.{t}", "partition": str(p)}
            got = [v for lb, v in samples["sparkmirror_record_count_total"] if lb == want]
            assert got == [n], (t, p, got)
        size = sum(len(f"k{i}") + 40 for n in sent.values() for i in range(n))
        assert _sum(samples, "sparkmirror_byte_count_total", remote) == size
        latencies = [v for lb, v in samples["sparkmirror_replication_latency_ms_max"] if lb["topic"] in remote]
        ages = [v for lb, v in samples["sparkmirror_record_age_ms_max"] if lb["topic"] in remote]
        # The records were produced 5 s before the mirror started: older than that when read.
        assert latencies and min(latencies) >= 5000, latencies
        assert ages and min(ages) >= 5000 and max(ages) <= max(latencies), (ages, latencies)
        states = {lb["sparkmirror_flow_state"]: v for lb, v in samples["sparkmirror_flow_state"]}
        assert states["running"] == 1 and states["failed"] == 0, states
        assert samples["sparkmirror_batch_duration_seconds_count"][0][1] >= 1
        wait_for(
            lambda: (
                (s := scrape_metrics(port)).get("sparkmirror_lag_records")
                and _sum(s, "sparkmirror_lag_records", remote) == 0
                and any(v > 0 for _lb, v in s.get("sparkmirror_last_checkpoint_timestamp_seconds", []))
            ),
            timeout_s=60,
            what="lag 0 and a checkpoint cycle in the metrics",
        )

        # `status` while it runs: running, where, nothing lagging, the group's checkpoint. The cycle
        # seen above may have read the group before its records were mirrored (no checkpoint yet):
        # the group's checkpoint comes with a later cycle (every 2 s here), read back by `status`.
        def status_with_group() -> dict | None:
            done = run_cli("status", str(cfg), "--json", "--max-lag", "0", timeout_s=180)
            assert done.returncode == 0, done.stderr
            (flow,) = json.loads(done.stdout)["flows"]
            return flow if any(g["group"] == group for g in flow["groups"]) else None

        flow = wait_for(status_with_group, timeout_s=30, what=f"group {group}'s checkpoint in `status`", interval_s=1)
        assert flow["state"] == "running" and flow["pid"] is not None, flow
        parts = {(p["topic"], p["partition"]): p for p in flow["partitions"]}
        for (t, p), n in sent.items():
            assert parts[(t, p)]["source_end_offset"] == n and parts[(t, p)]["mirrored_offset"] == n, parts[(t, p)]
            assert parts[(t, p)]["lag_records"] == 0
        # The checkpoints topic is shared with other tests' groups: ours is there, on its one partition.
        assert [g["partitions"] for g in flow["groups"] if g["group"] == group] == [1], flow["groups"]
        assert not errors, errors

    # Stopped, and records arrive that nobody mirrors: the lag and the age of the oldest waiting record.
    produce(bootstraps["A"], f"{prefix}.b", 0, _records(25, age_s=120))
    done = run_cli("status", str(cfg), "--json", timeout_s=180)
    assert done.returncode == 0, done.stderr
    (flow,) = json.loads(done.stdout)["flows"]
    assert flow["state"] == "stopped", flow
    (waiting,) = [p for p in flow["partitions"] if p["lag_records"]]
    assert (waiting["topic"], waiting["partition"], waiting["lag_records"]) == (f"{prefix}.b", 0, 25)
    assert 115 <= waiting["lag_seconds"] < 600, waiting
    lagging = run_cli("status", str(cfg), "--max-lag", "10", timeout_s=180)
    assert lagging.returncode == 8, (lagging.stdout, lagging.stderr)
    assert f"{prefix}.b" in lagging.stdout and "health: lagging" in lagging.stdout
