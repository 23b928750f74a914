"""`sparkmirror demo`: two local clusters, sample data, one mirror pass, the result."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from sparkmirror.devcluster.cluster import DEFAULT_DIR

if TYPE_CHECKING:
    from sparkmirror.config.model import MirrorConfig


def demo_properties(source: str, target: str) -> str:
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
"""


#: The consumer group the demo leaves part-way through ``orders`` on A.
DEMO_GROUP = "orders-app"
#: Records deleted at the start of each ``orders`` partition on A before mirroring.
_EXPIRED = 100


@click.command()
@click.option("--dir", "directory", default=str(DEFAULT_DIR), show_default=True, type=click.Path(path_type=Path))
@click.option("--records", default=5000, show_default=True, type=click.IntRange(1), help="Records per sample topic.")
def demo(directory: Path, records: int) -> None:
    """Start clusters A and B, write sample data to A, mirror it to B, show the result.

    Then what sets sparkmirror apart: a consumer group's exact position on B (the same next record
    as on A), the failover plan for it, and `sparkmirror status`.
    """
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
    positions = _commit_demo_group(boots["A"])
    click.echo(
        f"consumer group {DEMO_GROUP} on A has read part of orders: "
        + ", ".join(f"orders[{p}] at {o:,}" for (_t, p), o in sorted(positions.items()))
    )
    props = Path(directory).absolute() / "demo-mm2.properties"
    props.write_text(demo_properties(boots["A"], boots["B"]))
    click.echo(f"mirroring A -> B with sparkmirror (config: {props}) ...")
    cfg = load_config(props)
    runners = Mirror(cfg, once=True).run()
    print_summary(runners)
    _show_translation(boots, positions)
    _show_failover_plan(cfg)
    _show_status(cfg)
    click.echo("")
    click.echo("the clusters keep running: `sparkmirror dev status`, stop them with `sparkmirror dev down`")


def _commit_demo_group(bootstrap: str) -> dict[tuple[str, int], int]:
    """Let the first records of ``orders`` expire on A, then commit DEMO_GROUP a third of the way through.

    Expired records are never mirrored, so the same record then sits at another offset on B:
    the translation has something to do.
    """
    from confluent_kafka import TopicPartition

    from sparkmirror.kafka.factory import new_admin
    from sparkmirror.kafka.groups import commit_offsets
    from sparkmirror.kafka.inspect import watermarks

    admin = new_admin({"bootstrap.servers": bootstrap})
    partitions = len(admin.list_topics("orders", timeout=30).topics["orders"].partitions)
    marks = watermarks(admin, "orders", partitions)
    expired = {p: min(_EXPIRED, high) for p, (_low, high) in enumerate(marks)}
    for fut in admin.delete_records([TopicPartition("orders", p, off) for p, off in expired.items()]).values():
        fut.result()
    positions = {("orders", p): expired[p] + (high - expired[p]) // 3 for p, (_low, high) in enumerate(marks)}
    commit_offsets({"bootstrap.servers": bootstrap}, DEMO_GROUP, positions)
    click.echo(
        f"the first {_EXPIRED} records of each orders partition were deleted on A, as retention does: "
        "they are not mirrored, so B numbers the rest from 0"
    )
    return positions


def _show_translation(boots: dict[str, str], positions: dict[tuple[str, int], int]) -> None:
    from sparkmirror.client import translate_offsets
    from sparkmirror.kafka.lag import first_records

    click.echo("")
    click.echo(f"exact offset translation: where {DEMO_GROUP} resumes on B (sparkmirror.client.translate_offsets,")
    click.echo("the same answer as Kafka's RemoteClusterUtils.translateOffsets):")
    translated = {(tp.topic, tp.partition): off for tp, off in translate_offsets(boots["B"], "A", DEMO_GROUP).items()}
    on_a = first_records({"bootstrap.servers": boots["A"]}, positions)
    on_b = first_records({"bootstrap.servers": boots["B"]}, translated)
    for (topic, p), offset in sorted(positions.items()):
        remote = (f"A.{topic}", p)
        if remote not in translated:
            click.echo(f"  {topic}[{p}]: no checkpoint yet")
            continue
        a, b = on_a.get((topic, p)), on_b.get(remote)
        same = a is not None and b is not None and (a.key, a.value, a.timestamp_ms) == (b.key, b.value, b.timestamp_ms)
        click.echo(
            f"  A {topic}[{p}] @ {offset:>6,}  ->  B A.{topic}[{p}] @ {translated[remote]:>6,}   next record "
            f"key={_show(a.key if a else None)}: {'the same on both' if same else 'DIFFERS'}"
        )


def _show(raw: bytes | None) -> str:
    return "null" if raw is None else raw.decode(errors="replace")[:24]


def _show_failover_plan(cfg: MirrorConfig) -> None:
    from sparkmirror.failover.plan import build_plan
    from sparkmirror.failover.report import render

    click.echo("")
    click.echo(
        f"failover plan (dry run: `sparkmirror failover demo-mm2.properties --source A --target B "
        f"--groups {DEMO_GROUP}`; add --execute to commit it):"
    )
    plan = build_plan(cfg, command="failover", origin="A", destination="B", groups_pattern=DEMO_GROUP)
    for line in render(plan).splitlines():
        click.echo(f"  {line}")


def _show_status(cfg: MirrorConfig) -> None:
    from sparkmirror.cli.status import render_reports
    from sparkmirror.status.reader import read_flow

    click.echo("")
    click.echo("sparkmirror status demo-mm2.properties:")
    render_reports([read_flow(f) for f in cfg.flows])
