"""deploy/kubernetes/entrypoint.sh: what Spark's executor pods run, checked without Kubernetes.

Spark on Kubernetes starts each executor pod with the single argument ``executor`` and describes
the executor in ``SPARK_*`` variables. The script must turn them into a command line that Spark's
``KubernetesExecutorBackend`` (from the Spark inside pyspark, as in the image) accepts: here it
does, and the backend goes on to connect to the driver URL it was given (a closed port, so it
stops there). A wrong option would end in Spark's usage text instead.
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pyspark

ENTRYPOINT = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "entrypoint.sh"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_executor_entrypoint_starts_sparks_kubernetes_executor_backend(tmp_path: Path) -> None:
    port = _closed_port()
    env = {
        **os.environ,
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "SPARK_CONF_DIR": str(tmp_path),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_DRIVER_URL": f"spark://CoarseGrainedScheduler@127.0.0.1:{port}",
        "SPARK_EXECUTOR_ID": "1",
        "SPARK_EXECUTOR_CORES": "1",
        "SPARK_APPLICATION_ID": "spark-entrypoint-test",
        "SPARK_EXECUTOR_POD_IP": "127.0.0.1",
        "SPARK_RESOURCE_PROFILE_ID": "0",
        "SPARK_EXECUTOR_POD_NAME": "sparkmirror-exec-1",
        "SPARK_EXECUTOR_MEMORY": "256m",
        # A JVM option with a space must stay one option.
        "SPARK_JAVA_OPT_0": f"-Dspark.driver.port={port}",
        "SPARK_JAVA_OPT_1": "-Dspark.app.name=sparkmirror entrypoint test",
    }
    proc = subprocess.run(
        [str(ENTRYPOINT), "executor"], env=env, capture_output=True, text=True, timeout=180, check=False
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "Usage:" not in out and "Unrecognized options" not in out, out[-3000:]
    assert "KubernetesExecutorBackend" in out
    assert f"Failed to connect to /127.0.0.1:{port}" in out, out[-3000:]


def test_anything_else_runs_as_given() -> None:
    proc = subprocess.run([str(ENTRYPOINT), "echo", "a b"], capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0 and proc.stdout == "a b\n"
