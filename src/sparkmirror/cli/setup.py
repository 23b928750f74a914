"""`sparkmirror setup`: fetch the JVM jars once (Maven Central), then offline."""

from __future__ import annotations

import click


@click.command()
@click.option("--force", is_flag=True, help="Fetch again even if the cache is complete.")
def setup(force: bool) -> None:
    """Fetch Kafka's broker jars (the dev clusters), Kafka's MM2 client (used by the tests) and Kafka's Java
    clients (``sparkmirror.transport = java``) into the cache."""
    from sparkmirror import artifacts

    for art in artifacts.setup_artifacts():
        path = artifacts.fetch(art, force=force)
        click.echo(f"{art.name}: {len(art.jars())} jars in {path}")
