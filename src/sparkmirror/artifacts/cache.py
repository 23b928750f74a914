"""The jar cache: fetch the JVM artifacts sparkmirror runs on, once, from Maven Central.

Sets of jars come from Maven Central: Apache Kafka's broker
(``org.apache.kafka:kafka_2.13`` and its runtime dependencies) for the local
dev clusters, Kafka's MM2 client
(``connect-mirror-client``) for the tests that check compatibility with it,
and -- for the benchmark only, on its first run -- MirrorMaker 2 itself
(``connect-mirror``). Maven resolves them; after the first run everything is
read from the cache and no network is needed.

This module must never commit downloaded files to the project tree: the cache
lives under ``$SPARKMIRROR_CACHE`` (default ``~/.cache/sparkmirror``).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sparkmirror.errors import SetupError

log = logging.getLogger(__name__)

#: The Kafka release the dev clusters run. 4.x, KRaft only.
KAFKA_VERSION = "4.1.1"
SCALA_BINARY = "2.13"

_DONE_MARKER = ".complete"


def cache_root() -> Path:
    return Path(os.environ.get("SPARKMIRROR_CACHE", Path.home() / ".cache" / "sparkmirror"))


@dataclass(frozen=True)
class ArtifactSet:
    """A named set of Maven coordinates resolved into one folder of jars."""

    name: str
    coordinates: tuple[str, ...]
    #: groupId:artifactId pairs not to copy (already on the runtime's classpath).
    exclude: tuple[str, ...] = ()

    @property
    def directory(self) -> Path:
        return cache_root() / "jars" / self.name

    def marker_text(self) -> str:
        """What a complete cache folder records; a different recipe refetches."""
        return "\n".join([*self.coordinates, "exclude: " + ",".join(self.exclude)]) + "\n"

    def is_cached(self) -> bool:
        marker = self.directory / _DONE_MARKER
        return marker.exists() and marker.read_text() == self.marker_text()

    def jars(self) -> list[Path]:
        if not self.is_cached():
            raise SetupError(
                f"the jars of {self.name} are not in the cache {self.directory}; "
                "run `sparkmirror setup` (needs Maven Central once)"
            )
        return sorted(self.directory.glob("*.jar"))


def kafka_broker_artifacts(version: str = KAFKA_VERSION) -> ArtifactSet:
    return ArtifactSet(
        name=f"kafka-{version}",
        coordinates=(
            f"org.apache.kafka:kafka_{SCALA_BINARY}:{version}",
            # The broker logs through SLF4J; Kafka 4 ships log4j2 as its backend.
            "org.apache.logging.log4j:log4j-slf4j2-impl:2.24.3",
            "org.apache.logging.log4j:log4j-core:2.24.3",
            # log4j-slf4j2-impl binds SLF4J 2; Kafka's pom alone brings 1.7.
            "org.slf4j:slf4j-api:2.0.16",
        ),
    )


def mm2_client_artifacts(version: str = KAFKA_VERSION) -> ArtifactSet:
    """Kafka's own MM2 client library (``RemoteClusterUtils``, ``MirrorClient``).

    Not needed to run sparkmirror: tests use it to prove that an application on
    Kafka's client reads the checkpoints and heartbeats sparkmirror writes.
    """
    return ArtifactSet(
        name=f"connect-mirror-client-{version}",
        coordinates=(
            f"org.apache.kafka:connect-mirror-client:{version}",
            # A no-op SLF4J binding keeps the client's log lines off the
            # harness's stdout, which the tests parse.
            "org.slf4j:slf4j-nop:2.0.16",
            "org.slf4j:slf4j-api:2.0.16",
        ),
    )


def transport_artifacts(version: str = KAFKA_VERSION) -> ArtifactSet:
    """Kafka's Java clients, which the copy tasks' transport JVM runs (``sparkmirror.transport = java``,
    ``pipeline/transport``), and an SLF4J binding that logs to the JVM's stderr."""
    return ArtifactSet(
        name=f"transport-{version}",
        coordinates=(
            f"org.apache.kafka:kafka-clients:{version}",
            "org.slf4j:slf4j-simple:2.0.16",
            "org.slf4j:slf4j-api:2.0.16",
        ),
    )


def mm2_artifacts(version: str = KAFKA_VERSION) -> ArtifactSet:
    """Apache Kafka's MirrorMaker 2 (``connect-mirror``) with the Connect runtime it runs on.

    Not needed to run sparkmirror, nor fetched by ``sparkmirror setup`` (the
    Connect runtime with Jetty and Jersey is the largest of the sets): the
    benchmark fetches it on its first run, to measure MM2 in dedicated mode
    (``org.apache.kafka.connect.mirror.MirrorMaker``) beside sparkmirror.
    """
    return ArtifactSet(
        name=f"connect-mirror-{version}",
        coordinates=(
            f"org.apache.kafka:connect-mirror:{version}",
            # Kafka's distribution runs Connect on log4j2 through SLF4J 2.
            "org.apache.logging.log4j:log4j-slf4j2-impl:2.24.3",
            "org.apache.logging.log4j:log4j-core:2.24.3",
            "org.slf4j:slf4j-api:2.0.16",
        ),
    )


def _pom(artifacts: ArtifactSet) -> str:
    deps = []
    for coord in artifacts.coordinates:
        group, artifact, version = coord.split(":")
        deps.append(
            "    <dependency>"
            f"<groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version></dependency>"
        )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>sparkmirror.setup</groupId><artifactId>fetch</artifactId>"
        "<version>0</version><packaging>pom</packaging>\n"
        "  <dependencies>\n" + "\n".join(deps) + "\n  </dependencies>\n</project>\n"
    )


_SETTINGS = """<settings><mirrors><mirror>
  <id>central-only</id><mirrorOf>*</mirrorOf><url>https://repo1.maven.org/maven2</url>
</mirror></mirrors></settings>
"""


def fetch(artifacts: ArtifactSet, *, force: bool = False) -> Path:
    """Resolve ``artifacts`` into its cache folder with Maven; return the folder.

    A finished folder carries a marker file, so an interrupted download is
    redone rather than used half-complete.
    """
    target = artifacts.directory
    if artifacts.is_cached() and not force:
        log.debug("jars of %s already cached in %s", artifacts.name, target)
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise SetupError("Maven (`mvn`) is needed once to fetch jars from Maven Central")
    log.info("fetching %s from Maven Central into %s", ", ".join(artifacts.coordinates), target)
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{artifacts.name}.", dir=target.parent))
    try:
        (staging / "pom.xml").write_text(_pom(artifacts))
        # Some poms (Spark's among them) name extra repositories that are not
        # reachable from every network; everything needed is on Central.
        (staging / "settings.xml").write_text(_SETTINGS)
        cmd = [
            mvn,
            "-B",
            "-q",
            "-s",
            str(staging / "settings.xml"),
            "-f",
            str(staging / "pom.xml"),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={staging / 'jars'}",
        ]
        if artifacts.exclude:
            cmd.append("-DexcludeArtifactIds=" + ",".join(e.split(":")[1] for e in artifacts.exclude))
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise SetupError(
                f"Maven could not resolve {', '.join(artifacts.coordinates)} "
                f"(exit {proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}"
            )
        (staging / "jars").rename(target)
        (target / _DONE_MARKER).write_text(artifacts.marker_text())
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def setup_artifacts() -> list[ArtifactSet]:
    """Everything the demo, the tests and the pipeline need (``sparkmirror setup`` fetches them): the
    brokers' jars, MM2's client and the transport's Java clients; not MM2 itself (:func:`mm2_artifacts`)."""
    return [kafka_broker_artifacts(), mm2_client_artifacts(), transport_artifacts()]
