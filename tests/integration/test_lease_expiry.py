"""The flow's lease when its holder stops answering (killed, host lost, cut off), on a real broker.

A holder process is frozen with SIGSTOP: to the brokers that is a holder killed with SIGKILL or a host
cut off (no heartbeat). An instance on another host then gets the lease once the holder's session
(``SESSION_TIMEOUT_MS``, 15 s, docs/faults.md) has ended: a restart elsewhere is delayed, never
refused. When the frozen holder comes back it finds the partition held by the other instance and
sets ``FlowLease.lost`` (its flow then stops, exit 6). No Spark: the lease is taken before Spark starts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from kafka_helpers import create_topics, unique
from sparkmirror.kafka.lease import ACQUIRE_WAIT_S, SESSION_TIMEOUT_MS, FlowLease

_HOLDER = """
import sys, time
from sparkmirror.kafka.lease import FlowLease
bootstrap, group, topic = sys.argv[1:4]
lease = FlowLease({"bootstrap.servers": bootstrap}, flow="A->B", group=group, topic=topic, host="host-a")
lease.acquire({"bootstrap.servers": bootstrap})
print("acquired", flush=True)
deadline = time.monotonic() + 300
while not lease.lost.is_set() and time.monotonic() < deadline:
    time.sleep(0.2)
print("lost" if lease.lost.is_set() else "still held", flush=True)
sys.exit(6 if lease.lost.is_set() else 0)
"""


def test_a_holder_that_stops_answering_loses_the_lease_to_another_host_and_learns_it_lost_it(
    bootstraps, tmp_path: Path
) -> None:
    target = bootstraps["B"]
    group, topic = unique("__sparkmirror.lease.test"), unique("lease-topic")
    create_topics(target, {topic: 1})
    script = tmp_path / "holder.py"
    script.write_text(_HOLDER)
    holder = subprocess.Popen(
        [sys.executable, str(script), target, group, topic],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        # Another host's lock directory: the frozen holder keeps its flock, as a holder elsewhere would.
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    other: FlowLease | None = None
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "acquired"
        os.kill(holder.pid, signal.SIGSTOP)  # no heartbeat from now on: killed or cut off, to the brokers
        other = FlowLease({"bootstrap.servers": target}, flow="A->B", group=group, topic=topic, host="host-b")
        # Generous: the documented bound is the holder's session (SESSION_TIMEOUT_MS), well within this.
        other.acquire({"bootstrap.servers": target}, wait_s=ACQUIRE_WAIT_S * 3)
        assert not other.lost.is_set()
        os.kill(holder.pid, signal.SIGCONT)
        # Back, the holder rejoins, finds the partition held by host-b and gives the flow up
        # (ACQUIRE_WAIT_S after it lost the partition; generous again).
        out, _ = holder.communicate(timeout=ACQUIRE_WAIT_S + SESSION_TIMEOUT_MS / 1000 + 150)
        assert out.strip() == "lost" and holder.returncode == 6, (out, holder.returncode)
        assert not other.lost.is_set(), "the instance that took over must keep the lease"
    finally:
        if holder.poll() is None:
            os.kill(holder.pid, signal.SIGCONT)
            holder.kill()
            holder.wait(30)
        if other is not None:
            other.release()
