"""`sparkmirror setup`: fetch the JVM jars once (Maven Central), then offline."""

from __future__ import annotations

import click


@click.command()
@click.option("--force", is_flag=True, help="Fetch again even if the cache is complete.")
def setup(force: bool) -> None:
    """Fetch Kafka's broker jars (the dev clusters), Kafka's MM2 client (used by the tests) and Kafka's Java
    clients (``sparkmirror.transport = java``) into the cache."""
    from sparkmirror import artifacts

    for name, path in artifacts.fetch_all(force=force).items():
        click.echo(f"{name}: {len(list(path.glob('*.jar')))} jars in {path}")
