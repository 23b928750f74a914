"""The same job on a real Spark standalone cluster: one master, two workers.

The master and workers are started from the pyspark distribution on loopback by
the project's own code (`sparkmirror.devcluster.spark`, what `sparkmirror dev
spark up` runs); `sparkmirror run --master spark://…` ships what the executors
need (docs/deployment.md).
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafka_helpers import Rec, create_topics, produce, read_partition, run_cli, unique, write_config
from sparkmirror.devcluster.spark import SparkStandalone


@pytest.fixture(scope="module")
def spark_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, SparkStandalone]]:
    """A master and two workers of one core each, started by the project's own code (`dev spark up`)."""
    cluster = SparkStandalone(tmp_path_factory.mktemp("spark-standalone"))
    state = cluster.up(workers=2, cores=1, memory="2g")
    try:
        assert cluster.alive_workers(state) == 2
        yield state.url, cluster
    finally:
        cluster.down()
        assert cluster.status() is None
        assert not cluster.running(state), "a Spark daemon outlived `down`"


def _executor_python(directory: Path) -> tuple[Path, Path]:
    """A Python for the executors that has the project's dependencies but not sparkmirror, wrapped
    so that each start is recorded: (the wrapper, its record).

    A fresh venv sees this venv's site-packages through a path file; the editable install's own
    path file there is not processed, so sparkmirror can only come from what `run` ships (its zip).
    """
    env = directory / "executor-env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    site = next((env / "lib").glob("python3.*/site-packages"))
    (site / "project-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    python = env / "bin" / "python"
    probe = "import importlib.util as u, confluent_kafka, pyspark; print(u.find_spec('sparkmirror'))"
    found = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=True, cwd=directory)
    assert found.stdout.strip() == "None", "the executors' Python must not find sparkmirror by itself"
    starts = directory / "executor-python-starts.log"
    wrapper = env / "bin" / "python-recorded"
    wrapper.write_text(f'#!/bin/sh\necho "$$" >> {starts}\nexec {python} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, starts


def test_mirrors_through_a_standalone_cluster(bootstraps, spark_master, tmp_path: Path) -> None:
    """The executors run the Python given as spark.pyspark.python, which lacks sparkmirror: the
    package reaches them as `run` ships it (docs/deployment.md)."""
    url, cluster = spark_master
    executor_python, starts = _executor_python(tmp_path)
    topic = unique("standalone")
    create_topics(bootstraps["A"], {topic: 4})
    ts = int(time.time() * 1000)
    sent = {
        p: [Rec(f"k{i}".encode(), f"{p}-{i}".encode(), (("h", b"v"),), ts + i) for i in range(250)] for p in range(4)
    }
    for p, recs in sent.items():
        produce(bootstraps["A"], topic, p, recs)
    cfg = write_config(
        tmp_path / "mm2.properties",
        bootstraps["A"],
        bootstraps["B"],
        extra=f"A->B.topics = {topic}\n",
    )
    result = run_cli(
        "run", str(cfg), "--once", "--master", url, "--spark-conf", "spark.executor.memory=1g",
        "--spark-conf", f"spark.pyspark.python={executor_python}",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    assert "1,000 records mirrored" in result.stdout
    for p, recs in sent.items():
        assert read_partition(bootstraps["B"], f"A.{topic}", p) == recs
    # The writer ran in the workers' executors, not in the driver: their logs show the tasks.
    executor_logs = cluster.executor_logs()
    assert executor_logs, "no executor ran on the standalone workers"
    finished = sum(log.read_text(errors="replace").count("Finished task") for log in executor_logs)
    assert finished > 0, "the executors ran no task"
    assert starts.exists() and starts.read_text().split(), "the executors did not run the Python given to them"
