"""The same job on a real Spark standalone cluster: one master, two workers.

The master and workers are started from the pyspark distribution on
loopback; `sparkmirror run --master spark://…` ships what the executors need.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafka_helpers import Rec, create_topics, produce, read_partition, run_cli, unique, wait_for, write_config


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def spark_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    import pyspark

    home = Path(pyspark.__file__).parent
    work = tmp_path_factory.mktemp("spark-standalone")
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(work)}
    spark_class = str(home / "bin" / "spark-class")
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs = []
    logs = []

    def start(name: str, *args: str) -> None:
        log = (work / f"{name}.log").open("wb")
        logs.append(log)
        procs.append(subprocess.Popen([spark_class, *args], env=env, stdout=log, stderr=subprocess.STDOUT))

    start(
        "master",
        "org.apache.spark.deploy.master.Master",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--webui-port",
        str(_free_port()),
    )
    for i in range(2):
        start(
            f"worker{i}",
            "org.apache.spark.deploy.worker.Worker",
            url,
            "--host",
            "127.0.0.1",
            "--cores",
            "1",
            "--memory",
            "2g",
            "--work-dir",
            str(work / f"worker{i}"),
            "--webui-port",
            str(_free_port()),
        )
    try:
        wait_for(
            lambda: (
                sum("Registering worker" in (work / "master.log").read_text() for _ in [0])
                and (work / "master.log").read_text().count("Registering worker") >= 2
            ),
            timeout_s=90,
            what="two workers registered with the master",
        )
        yield url, work
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        for log in logs:
            log.close()


def test_mirrors_through_a_standalone_cluster(bootstraps, spark_master, tmp_path: Path) -> None:
    url, work = spark_master
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
        checkpoints=tmp_path / "checkpoints",
        extra=f"A->B.topics = {topic}\n",
    )
    result = run_cli("run", str(cfg), "--once", "--master", url, "--spark-conf", "spark.executor.memory=1g")
    assert result.returncode == 0, result.stderr[-4000:]
    assert "1,000 records mirrored" in result.stdout
    for p, recs in sent.items():
        assert read_partition(bootstraps["B"], f"A.{topic}", p) == recs
    # The writer ran in the workers' executors, not in the driver.
    executor_logs = list(work.glob("worker*/app-*/*/stderr"))
    assert executor_logs, "no executor ran on the standalone workers"
