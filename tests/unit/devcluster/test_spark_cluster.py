"""The local Spark standalone cluster's bookkeeping and `dev spark` arguments, without starting Spark.

Starting it for real is tests/e2e/test_spark_standalone.py.
"""

from __future__ import annotations

import os
from pathlib import Path

from click.testing import CliRunner

from sparkmirror.cli.main import cli
from sparkmirror.devcluster.spark import DaemonState, SparkStandalone, StandaloneState, _distinct_free_ports


def test_ports_are_distinct_below_the_ephemeral_range_and_avoid_the_taken_one() -> None:
    ports = _distinct_free_ports(6, taken={20000})
    assert len(set(ports)) == 6
    assert all(20000 < p < 32768 for p in ports)


def test_a_pid_that_is_not_our_daemon_is_not_running(tmp_path: Path) -> None:
    # This test's own process is alive but is no Spark daemon of the directory.
    assert not DaemonState("master", 1, 2, pid=os.getpid()).is_running(tmp_path)
    assert not DaemonState("master", 1, 2, pid=None).is_running(tmp_path)


def test_state_round_trips_and_down_forgets_a_dead_cluster(tmp_path: Path) -> None:
    cluster = SparkStandalone(tmp_path)
    assert cluster.status() is None
    assert cluster.down() is False
    state = StandaloneState(
        directory=str(tmp_path),
        master=DaemonState("master", 21000, 21001, pid=None),
        workers=[DaemonState("worker-1", 21002, 21003, pid=None)],
    )
    cluster._save(state)
    assert cluster.status() == state
    assert state.url == "spark://127.0.0.1:21000"
    assert cluster.running(state) == []
    assert cluster.down() is True
    assert cluster.status() is None


def test_dev_spark_refuses_a_bad_memory_size_and_worker_count(tmp_path: Path) -> None:
    runner = CliRunner()
    bad_memory = runner.invoke(cli, ["dev", "spark", "up", "--memory", "2x", "--dir", str(tmp_path)])
    assert bad_memory.exit_code == 2 and "expected a size such as 2g" in bad_memory.output
    bad_workers = runner.invoke(cli, ["dev", "spark", "up", "--workers", "0", "--dir", str(tmp_path)])
    assert bad_workers.exit_code == 2
    assert SparkStandalone(tmp_path).status() is None  # nothing was started


def test_dev_spark_status_and_down_without_a_cluster(tmp_path: Path) -> None:
    runner = CliRunner()
    status = runner.invoke(cli, ["dev", "spark", "status", "--dir", str(tmp_path)])
    assert status.exit_code == 0 and "no Spark standalone cluster" in status.output
    down = runner.invoke(cli, ["dev", "spark", "down", "--dir", str(tmp_path)])
    assert down.exit_code == 0 and "no Spark standalone cluster" in down.output
