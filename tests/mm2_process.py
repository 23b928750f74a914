"""Apache Kafka's MirrorMaker 2 in dedicated mode, as a team runs it, for the migration tests.

``org.apache.kafka.connect.mirror.MirrorMaker`` from the ``connect-mirror`` jars that
``sparkmirror.artifacts.mm2_artifacts`` caches (Maven Central on the first run, offline afterwards),
run on the same properties file as sparkmirror. Nothing of MM2 is mocked.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sparkmirror.artifacts import fetch, mm2_artifacts

_LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
"""

#: What MM2 needs beside sparkmirror's keys in the shared file on single-broker dev clusters: its Connect
#: worker's internal topics, no ACL sync (no authorizer), and source offsets committed every second
#: (a worker key: MirrorMakerConfig takes it from the target cluster's prefix, not the top level).
MM2_LINES = """\
B->A.enabled = false
offset.storage.replication.factor = 1
status.storage.replication.factor = 1
config.storage.replication.factor = 1
sync.topic.acls.enabled = false
B.offset.flush.interval.ms = 1000
tasks.max = 1
"""


@contextmanager
def mirror_maker(config: Path, workdir: Path, name: str) -> Iterator[subprocess.Popen[bytes]]:
    """MM2 running ``config`` (target B) until the block ends; then stopped with SIGTERM, as an operator
    would (Connect commits its source offsets on the way out)."""
    artifacts = mm2_artifacts()
    fetch(artifacts)
    log = workdir / f"{name}.log"
    log4j = workdir / f"{name}-log4j2.properties"
    log4j.write_text(_LOG4J2.format(log=log))
    cmd = [
        "java",
        "-Xmx512m",
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        os.pathsep.join(str(j) for j in artifacts.jars()),
        "org.apache.kafka.connect.mirror.MirrorMaker",
        str(config),
        "--clusters",
        "B",
    ]
    with (workdir / f"{name}.out").open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)


def tail(workdir: Path, name: str, chars: int = 3000) -> str:
    """The end of MM2's log, for a failing assertion."""
    log = workdir / f"{name}.log"
    return log.read_text(errors="replace")[-chars:] if log.exists() else "(no log)"
