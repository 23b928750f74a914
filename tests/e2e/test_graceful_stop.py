"""SIGTERM stops `sparkmirror run` cleanly and a restart resumes where it stopped.

A clean stop finishes (or abandons) the batch in flight without loss; the
next run starts from the committed position, so a stop/start cycle without
failures writes every record exactly once.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from kafka_helpers import (
    Rec,
    create_topics,
    end_offsets,
    produce,
    read_partition,
    run_cli,
    sparkmirror_cmd,
    unique,
    wait_for,
    write_config,
)


def test_sigterm_stops_cleanly_and_restart_resumes(bootstraps, tmp_path: Path) -> None:
    topic = unique("sigterm")
    create_topics(bootstraps["A"], {topic: 2})
    ts = int(time.time() * 1000)
    first = [Rec(f"k{i}".encode(), f"first-{i}".encode(), (), ts) for i in range(300)]
    for p in range(2):
        produce(bootstraps["A"], topic, p, first)
    cfg = write_config(
        tmp_path / "mm2.properties",
        bootstraps["A"],
        bootstraps["B"],
        extra=f"A->B.topics = {topic}\n",
    )
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(sparkmirror_cmd("run", str(cfg)), stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_for(
                lambda: end_offsets(bootstraps["B"], f"A.{topic}") == {0: 300, 1: 300},
                timeout_s=180,
                what="the first records on B",
            )
            # Progress lines name the flow, the rate and the lag.
            wait_for(
                lambda: "flow=A->B records=" in log.read_text() and "lag=" in log.read_text(),
                timeout_s=30,
                what="a progress line",
            )
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(90) == 0, log.read_text()[-3000:]
        finally:
            if proc.poll() is None:
                proc.kill()
    text = log.read_text()
    assert "received SIGTERM" in text
    assert "600 records mirrored" in text

    second = [Rec(f"k{i}".encode(), f"second-{i}".encode(), (), ts) for i in range(200)]
    for p in range(2):
        produce(bootstraps["A"], topic, p, second)
    result = run_cli("run", str(cfg), "--once")
    assert result.returncode == 0, result.stderr[-3000:]
    # Only the new records were read in the second run: it resumed.
    assert "flow A->B: 400 records mirrored" in result.stdout
    for p in range(2):
        got = [r.value for r in read_partition(bootstraps["B"], f"A.{topic}", p)]
        assert got == [r.value for r in first + second], f"A.{topic}[{p}]"
