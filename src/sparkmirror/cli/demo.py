"""`sparkmirror demo`: two local clusters, sample data, one mirror pass, the result."""

from __future__ import annotations

from pathlib import Path

import click

from sparkmirror.devcluster.cluster import DEFAULT_DIR


def demo_properties(source: str, target: str, checkpoints: Path) -> str:
    return f"""\
# Written by `sparkmirror demo`; MirrorMaker 2's format.
clusters = A, B
A.bootstrap.servers = {source}
B.bootstrap.servers = {target}
A->B.enabled = true
A->B.topics = .*
# One broker per dev cluster.
replication.factor = 1
checkpoints.topic.replication.factor = 1
heartbeats.topic.replication.factor = 1
offset-syncs.topic.replication.factor = 1
sparkmirror.checkpoint.location = {checkpoints}
"""


@click.command()
@click.option("--dir", "directory", default=str(DEFAULT_DIR), show_default=True, type=click.Path(path_type=Path))
@click.option("--records", default=5000, show_default=True, type=click.IntRange(1), help="Records per sample topic.")
def demo(directory: Path, records: int) -> None:
    """Start clusters A and B, write sample data to A, mirror it to B, show the result."""
    from sparkmirror.cli.run import print_summary
    from sparkmirror.config import load_config
    from sparkmirror.devcluster.cluster import DevClusters
    from sparkmirror.devcluster.sample import produce_sample
    from sparkmirror.pipeline.driver.mirror import Mirror

    click.echo("starting local Kafka clusters A and B ...")
    boots = DevClusters(directory).up(["A", "B"])
    for alias, b in boots.items():
        click.echo(f"{alias}={b}")
    counts = produce_sample(boots["A"], records_per_topic=records)
    click.echo(f"wrote {sum(counts.values()):,} records to A: " + ", ".join(f"{t} ({n:,})" for t, n in counts.items()))
    props = Path(directory).absolute() / "demo-mm2.properties"
    # One checkpoint per incarnation of cluster A: a re-created A starts afresh.
    source_id = DevClusters(directory).status()["A"].cluster_id
    props.write_text(demo_properties(boots["A"], boots["B"], Path(directory).absolute() / "checkpoints" / source_id))
    click.echo(f"mirroring A -> B with sparkmirror (config: {props}) ...")
    runners = Mirror(load_config(props), once=True).run()
    print_summary(runners)
    click.echo("the clusters keep running: `sparkmirror dev status`, stop them with `sparkmirror dev down`")
