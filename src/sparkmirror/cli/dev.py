"""`sparkmirror dev up|down|status`: local Kafka clusters on loopback; `dev spark up|down|status`: a
local Spark standalone cluster."""

from __future__ import annotations

from pathlib import Path

import click

from sparkmirror.devcluster.cluster import DEFAULT_BASE_PORT, DEFAULT_DIR
from sparkmirror.devcluster.security import SECURITY_MODES
from sparkmirror.devcluster.spark import DEFAULT_SPARK_DIR


def _aliases(value: str | None) -> list[str] | None:
    if value is None:
        return None
    names = [a.strip() for a in value.split(",") if a.strip()]
    if not names:
        raise click.BadParameter("expected cluster aliases such as A,B", param_hint="--clusters")
    return names


@click.group()
def dev() -> None:
    """Local Apache Kafka clusters (KRaft) for trying sparkmirror out."""


@dev.command()
@click.option("--clusters", default="A,B", show_default=True, help="Cluster aliases to start.")
@click.option("--brokers", default=1, show_default=True, type=click.IntRange(1, 5), help="Brokers per cluster.")
@click.option(
    "--base-port",
    default=DEFAULT_BASE_PORT,
    show_default=True,
    type=int,
    help="First port; each cluster takes 10 from here on.",
)
@click.option("--dir", "directory", default=str(DEFAULT_DIR), show_default=True, type=click.Path(path_type=Path))
@click.option(
    "--security",
    type=click.Choice(SECURITY_MODES),
    default="plaintext",
    show_default=True,
    help="ssl: mutual TLS; sasl_ssl: SCRAM-SHA-512/256 and PLAIN over TLS. Both enforce ACLs.",
)
def up(clusters: str, brokers: int, base_port: int, directory: Path, security: str) -> None:
    """Start clusters and print ALIAS=bootstrap servers, one line each.

    Secured clusters also print the mm2.properties lines to reach them as the super user
    ``mirror``; the passwords stay in <dir>/security/credentials.properties, referenced through
    MM2's file config provider (``app`` is a user without any right).
    """
    from sparkmirror.devcluster.cluster import DevClusters
    from sparkmirror.devcluster.security import mm2_lines

    dev_clusters = DevClusters(directory)
    result = dev_clusters.up(_aliases(clusters) or [], brokers=brokers, base_port=base_port, security=security)
    for alias, bootstrap in result.items():
        click.echo(f"{alias}={bootstrap}")
    if security != "plaintext":
        click.echo(f"# mm2.properties settings for these clusters (security={security}, user mirror):")
        for line in mm2_lines(dev_clusters.security(), security, result):
            click.echo(line)


@dev.command()
@click.option("--clusters", default=None, help="Only these aliases (default: all).")
@click.option("--dir", "directory", default=str(DEFAULT_DIR), show_default=True, type=click.Path(path_type=Path))
@click.option("--keep-data", is_flag=True, help="Keep the data so that `dev up` resumes it.")
@click.option("--kill", is_flag=True, help="SIGKILL the brokers (simulate a crash).")
def down(clusters: str | None, directory: Path, keep_data: bool, kill: bool) -> None:
    """Stop clusters (all, or the named ones)."""
    from sparkmirror.devcluster.cluster import DevClusters

    stopped = DevClusters(directory).down(_aliases(clusters), keep_data=keep_data, kill=kill)
    click.echo("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))


@dev.command()
@click.option("--dir", "directory", default=str(DEFAULT_DIR), show_default=True, type=click.Path(path_type=Path))
def status(directory: Path) -> None:
    """Say which clusters run, with their brokers."""
    from sparkmirror.devcluster.cluster import DevClusters

    state = DevClusters(directory).status()
    if not state:
        click.echo(f"no dev clusters in {directory}")
        return
    for alias, c in state.items():
        running = c.running_brokers()
        word = "running" if len(running) == len(c.brokers) else "stopped" if not running else "degraded"
        pids = ",".join(str(b.pid) for b in running) or "-"
        secured = "" if c.security == "plaintext" else f" security={c.security}"
        click.echo(f"{alias}={c.bootstrap} {word} brokers={len(running)}/{len(c.brokers)} pids={pids}{secured}")


@dev.group()
def spark() -> None:
    """A local Spark standalone cluster (a master and workers on loopback) for `run --master spark://…`."""


_SPARK_DIR = click.option(
    "--dir", "directory", default=str(DEFAULT_SPARK_DIR), show_default=True, type=click.Path(path_type=Path)
)


@spark.command("up")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 8), help="Workers to start.")
@click.option("--cores", default=1, show_default=True, type=click.IntRange(1, 64), help="Cores per worker.")
@click.option("--memory", default="2g", show_default=True, help="Memory per worker for its executors (e.g. 2g).")
@click.option("--port", default=None, type=click.IntRange(1, 65535), help="The master's port (default: a free one).")
@_SPARK_DIR
def spark_up(workers: int, cores: int, memory: str, port: int | None, directory: Path) -> None:
    """Start a master and workers; print the master URL to pass to `sparkmirror run --master`."""
    from sparkmirror.devcluster.spark import SparkStandalone

    if not memory[:-1].isdigit() or memory[-1].lower() not in "mg":
        raise click.BadParameter(f"expected a size such as 2g or 512m, got {memory!r}", param_hint="--memory")
    state = SparkStandalone(directory).up(workers=workers, cores=cores, memory=memory, port=port)
    click.echo(f"master={state.url}")
    click.echo(f"ui={state.webui}")
    click.echo(f"logs={state.directory}/logs")


@spark.command("down")
@_SPARK_DIR
def spark_down(directory: Path) -> None:
    """Stop the workers (and their executors) and the master; the logs stay in <dir>/logs."""
    from sparkmirror.devcluster.spark import SparkStandalone

    stopped = SparkStandalone(directory).down()
    click.echo("stopped the Spark standalone cluster" if stopped else f"no Spark standalone cluster in {directory}")


@spark.command("status")
@_SPARK_DIR
def spark_status(directory: Path) -> None:
    """Say whether the cluster runs, with its master URL and registered workers."""
    from sparkmirror.devcluster.spark import SparkStandalone

    cluster = SparkStandalone(directory)
    state = cluster.status()
    if state is None:
        click.echo(f"no Spark standalone cluster in {directory}")
        return
    running = cluster.running(state)
    master_up = state.master in running
    workers_up = sum(1 for w in state.workers if w in running)
    word = "running" if master_up and workers_up == len(state.workers) else "stopped" if not running else "degraded"
    alive = cluster.alive_workers(state) if master_up else 0
    click.echo(
        f"master={state.url} {word} workers={workers_up}/{len(state.workers)} registered={alive} ui={state.webui}"
    )
