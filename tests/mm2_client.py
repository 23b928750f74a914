"""Run Kafka's own MM2 client library (``connect-mirror-client``) against a cluster.

The tests use it to prove that an application calling ``RemoteClusterUtils`` on a
sparkmirror target reads what sparkmirror wrote. The small Java program in
``tests/mm2client/`` is compiled once per test session against the jars that
``sparkmirror.artifacts.mm2_client_artifacts`` caches (Maven Central on
the first run, offline afterwards). This module never mocks Kafka or the client.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from sparkmirror.artifacts import fetch, mm2_client_artifacts

SOURCE = Path(__file__).parent / "mm2client" / "TranslateOffsets.java"
MAIN_CLASS = "TranslateOffsets"

#: RemoteClusterUtils calls that take only a bootstrap and print names.
NAME_MODES = ("heartbeatTopics", "checkpointTopics", "upstreamClusters")

_compiled: dict[str, Path] = {}


def _classpath_jars() -> list[Path]:
    artifacts = mm2_client_artifacts()
    fetch(artifacts)
    return artifacts.jars()


def _recipe() -> str:
    """What the compiled classes depend on: the program's text and the jars."""
    digest = hashlib.sha256(SOURCE.read_bytes())
    for jar in _classpath_jars():
        digest.update(jar.name.encode())
    return digest.hexdigest()[:16]


def compile_mm2_client(workdir: Path) -> Path:
    """Compile the harness (once per session); return the folder of its classes.

    Later calls reuse the first compilation, whatever ``workdir`` they pass, as long
    as its classes are still there.
    """
    recipe = _recipe()
    done = _compiled.get(recipe)
    if done is not None and (done / f"{MAIN_CLASS}.class").exists():
        return done
    classes = workdir / f"mm2client-classes-{recipe}"
    classes.mkdir(parents=True, exist_ok=True)
    cmd = [
        "javac",
        "--release",
        "17",
        "-Xlint:all",
        "-d",
        str(classes),
        "-cp",
        os.pathsep.join(str(j) for j in _classpath_jars()),
        str(SOURCE),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, f"javac of {SOURCE.name} failed (exit {proc.returncode}):\n{proc.stderr}"
    _compiled[recipe] = classes
    return classes


def run_mm2_client(*args: str, workdir: Path, timeout_s: float = 120) -> str:
    """Run the harness with ``args``; return its stdout. Fails the test on a non-zero exit."""
    classes = compile_mm2_client(workdir)
    classpath = os.pathsep.join([str(classes), *(str(j) for j in _classpath_jars())])
    cmd = ["java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp", classpath, MAIN_CLASS, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    assert proc.returncode == 0, (
        f"Kafka's MM2 client failed (exit {proc.returncode}) for {' '.join(args)}:\n"
        f"stderr:\n{proc.stderr[-4000:]}\nstdout:\n{proc.stdout[-2000:]}"
    )
    return proc.stdout


def translate_offsets_with_mm2(
    bootstrap: str, source_alias: str, group: str, *, workdir: Path, timeout_s: float = 30
) -> dict[tuple[str, int], int]:
    """``RemoteClusterUtils.translateOffsets`` on ``bootstrap`` for ``group`` of ``source_alias``.

    Returns ``{(topic, partition): downstream offset}`` with topics as the checkpoints name
    them. ``timeout_s`` is the client's own: past it, it returns what it read so far.
    """
    out = run_mm2_client(
        bootstrap, source_alias, group, str(int(timeout_s * 1000)), workdir=workdir, timeout_s=timeout_s + 120
    )
    offsets: dict[tuple[str, int], int] = {}
    for line in out.splitlines():
        topic, partition, offset = line.split("\t")
        offsets[(topic, int(partition))] = int(offset)
    return offsets


def remote_cluster_names(mode: str, bootstrap: str, *, workdir: Path) -> set[str]:
    """``RemoteClusterUtils.<mode>`` for a mode of :data:`NAME_MODES`: topic or cluster names."""
    assert mode in NAME_MODES, f"unknown mode {mode!r}; one of {NAME_MODES}"
    return set(run_mm2_client(mode, bootstrap, workdir=workdir).split())


def replication_hops_with_mm2(bootstrap: str, upstream_alias: str, *, workdir: Path) -> int:
    """``RemoteClusterUtils.replicationHops``: hops from ``upstream_alias`` (-1 if unreachable)."""
    return int(run_mm2_client("replicationHops", bootstrap, upstream_alias, workdir=workdir).strip())
