"""`sparkmirror offsets translate`: a group's source positions as target offsets."""

from __future__ import annotations

import json
from pathlib import Path

import click

from sparkmirror.cli.flows import flows_option, mm2_offsets_topic_option
from sparkmirror.errors import ConfigError


@click.group()
def offsets() -> None:
    """Offset translation between clusters (exact, from sparkmirror's offset map)."""


@offsets.command()
@click.argument("config", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--source", required=True, help="Source cluster alias (where the group consumed).")
@click.option("--target", required=True, help="Target cluster alias (where the group would resume).")
@click.option("--group", required=True, help="Consumer group id.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def translate(config: Path, source: str, target: str, group: str, as_json: bool) -> None:
    """Per partition: the group's source offset, its exact target offset, and how it was derived."""
    from sparkmirror.config import load_config
    from sparkmirror.offsets.translate import translate_group

    cfg = load_config(config)
    flow = cfg.find_flow(source, target)
    if flow is None:
        raise ConfigError(f"{source}->{target}: no such flow in {config}", key=f"{source}->{target}.enabled")
    report = translate_group(flow, group)
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2))
        return
    click.echo(f"group {group}, flow {flow.name} (positions from the {report.positions_from})")
    if not report.partitions:
        click.echo("  no committed offsets on mirrored topics")
        return
    click.echo(f"  {'source topic[partition]':<40} {'source':>10} {'target':>10}  method")
    for p in report.partitions:
        target_off = "-" if p.target_offset is None else str(p.target_offset)
        click.echo(
            f"  {p.source_topic + f'[{p.partition}]':<40} {p.source_offset:>10} {target_off:>10}  "
            f"{p.method}: {p.explanation}"
        )


@offsets.command("index-history")
@click.argument("config", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@flows_option
@mm2_offsets_topic_option
@click.option(
    "--window",
    type=click.IntRange(min=1),
    default=None,
    metavar="RECORDS",
    help="Source records a replay of MM2's may go back (default 1,000,000; 24 bytes each in memory).",
)
@click.option(
    "--shard",
    default="0/1",
    metavar="I/N",
    help="Only the I-th of every N partitions (0-based, in topic and partition order): N processes started "
    "with 0/N .. N-1/N share the work, one core each.",
)
@click.option(
    "--ignore-timestamps",
    is_flag=True,
    help="Match records on key, value and headers only: for remote topics whose records carry the time they were "
    "appended (message.timestamp.type=LogAppendTime), not the source's.",
)
@click.option(
    "--source-isolation",
    type=click.Choice(["read_uncommitted", "read_committed"]),
    default=None,
    help="How MirrorMaker 2 read the source (default: the file's source consumer isolation.level, else Kafka's "
    "read_uncommitted): with read_committed it copied no aborted record, and neither must be looked for.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def index_history(
    config: Path,
    flows: tuple[str, ...],
    mm2_offsets_topic: str,
    window: int | None,
    shard: str,
    ignore_timestamps: bool,
    source_isolation: str | None,
    as_json: bool,
) -> None:
    """Rebuild the exact offset map of what MirrorMaker 2 copied before sparkmirror took over (issue 28).

    Reads each source partition beside its remote partition, from the remote's start to where
    sparkmirror's copying began, and writes the offset map's segments for it. Safe while the flow runs;
    resumable (a rerun continues where the last stopped); a partition whose two logs do not match is
    refused with its offsets (exit 1), the others are indexed. docs/migrating-from-mm2.md.
    """
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from sparkmirror.cli.flows import chosen_flows
    from sparkmirror.config import load_config
    from sparkmirror.core.history import DEFAULT_WINDOW
    from sparkmirror.offsets.history import HistoryReport
    from sparkmirror.offsets.history import index_history as run_index

    try:
        i, n = (int(x) for x in shard.split("/"))
        if not 0 <= i < n:
            raise ValueError
    except ValueError:
        raise ConfigError(f"--shard {shard}: expected I/N with 0 <= I < N, e.g. 0/2 and 1/2") from None
    reports: list[HistoryReport] = []
    for flow in chosen_flows(load_config(config), config, flows):
        with Progress(
            TextColumn(f"flow={flow.name} {{task.description}}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("remote offsets"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
        ) as bar:
            task = bar.add_task("planning", total=None)

            def total(n: int, task: object = task, bar: Progress = bar) -> None:
                bar.update(task, total=n, description="indexing")  # type: ignore[arg-type]

            def advance(name: str, n: int, task: object = task, bar: Progress = bar) -> None:
                bar.update(task, advance=n, description=name)  # type: ignore[arg-type]

            reports.append(
                run_index(
                    flow,
                    mm2_offsets_topic=mm2_offsets_topic,
                    window=window or DEFAULT_WINDOW,
                    shard=(i, n),
                    timestamps=not ignore_timestamps,
                    source_isolation=source_isolation,
                    progress=advance,
                    total=total,
                )
            )
        if not as_json:
            _print_history(reports[-1])
    if as_json:
        click.echo(json.dumps([r.as_dict() for r in reports], indent=2))
    if any(r.refused for r in reports):
        raise SystemExit(1)


def _print_history(report: object) -> None:
    from sparkmirror.offsets.history import HistoryReport

    assert isinstance(report, HistoryReport)
    click.echo(
        f"flow={report.flow}: MirrorMaker 2's history (its positions from {report.mm2_offsets_topic}) into "
        f"{report.offset_map_topic}"
    )
    for p in report.partitions:
        name = f"{p.source_topic}[{p.partition}]"
        if p.status == "indexed":
            src = f"source offsets {p.source_first} to {p.source_last}" if p.records else "no source record"
            line = (
                f"{p.remote_topic}[{p.partition}] offsets {p.remote_from} to {p.remote_to - 1}: {p.records:,} records "
                f"mapped to {src} in {p.segments:,} segments"
            )
            click.echo(f"  {name:<32} indexed  {line}" + (f"; {p.detail}" if p.detail else ""))
        else:
            click.echo(f"  {name:<32} {p.status:<8} {p.detail}")
    indexed = [p for p in report.partitions if p.status == "indexed"]
    records = sum(p.records for p in indexed)
    read = sum(p.records_read for p in report.partitions)
    nbytes = sum(p.bytes_read for p in report.partitions)
    busy = sum(p.seconds for p in report.partitions if p.records_read)
    counts = ", ".join(
        f"{sum(1 for p in report.partitions if p.status == s)} {s}"
        for s in ("indexed", "done", "skipped", "refused")
        if any(p.status == s for p in report.partitions)
    )
    rate = f" ({read / busy:,.0f} records/s, {nbytes / 1e6 / busy:,.1f} MB/s while reading)" if busy >= 0.5 else ""
    click.echo(
        f"summary: {len(report.partitions)} partitions ({counts or 'none'}); {records:,} records mapped in "
        f"{sum(p.segments for p in indexed):,} segments; {read:,} records read ({nbytes / 1e6:,.1f} MB) in "
        f"{report.seconds:.1f}s{rate}"
    )
