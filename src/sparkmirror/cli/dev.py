"""`sparkmirror dev up|down|status`: local Kafka clusters on loopback."""

from __future__ import annotations

from pathlib import Path

import click

from sparkmirror.devcluster.cluster import DEFAULT_BASE_PORT, DEFAULT_DIR
from sparkmirror.devcluster.security import SECURITY_MODES


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
