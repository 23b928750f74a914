"""`sparkmirror status mm2.properties`: each flow's state, lag and checkpoints, read from the clusters.

It works whether or not the mirror runs: the state comes from what the flow last wrote to its
target, the lag from the source and the offset map. Exit codes: 0 healthy, 8 a partition lags
beyond ``--max-lag`` / ``--max-lag-seconds``, 9 a flow failed, went silent or never reported;
1 a cluster could not be read, 2 usage or configuration error.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from sparkmirror.cli.flows import flows_option

if TYPE_CHECKING:
    from sparkmirror.status.reader import FlowReport


@click.command()
@click.argument("config", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@flows_option
@click.option("--json", "as_json", is_flag=True, help="Print the same facts as JSON.")
@click.option(
    "--max-lag", type=click.IntRange(min=0), default=None, help="Exit 8 when a partition lags by more records."
)
@click.option(
    "--max-lag-seconds",
    type=click.FloatRange(min=0),
    default=None,
    help="Exit 8 when a partition's oldest waiting record is older.",
)
@click.option("--all-partitions", is_flag=True, help="List every partition (default: only those that lag).")
def status(
    config: Path,
    flows: tuple[str, ...],
    as_json: bool,
    max_lag: int | None,
    max_lag_seconds: float | None,
    all_partitions: bool,
) -> None:
    """Show each flow's state, its lag per partition and its groups' checkpoints."""
    from sparkmirror.cli.flows import chosen_flows
    from sparkmirror.config import load_config
    from sparkmirror.core.status import health
    from sparkmirror.status.reader import read_flow

    chosen = chosen_flows(load_config(config), config, flows)
    now_ms = int(time.time() * 1000)
    reports = [read_flow(f, now_ms) for f in chosen]
    code = health(
        {r.flow: r.state for r in reports},
        {r.flow: r.partitions for r in reports},
        now_ms,
        max_lag_records=max_lag,
        max_lag_seconds=max_lag_seconds,
    )
    if as_json:
        doc = {"health": code.name.lower(), "exit_code": int(code), "flows": [r.as_dict(now_ms) for r in reports]}
        click.echo(json.dumps(doc, indent=2))
    else:
        render_reports(reports, now_ms, all_partitions=all_partitions, verdict=code.name.lower())
    click.get_current_context().exit(int(code))


def flow_control_line(r: FlowReport) -> str:
    """What flow control holds the flow to, as its process last said (empty: nothing)."""
    s = r.status
    if s is None or r.state not in ("running", "paused"):
        return ""
    parts = []
    if r.state == "paused":
        parts.append("paused by an operator: no source partition is read (`sparkmirror resume` goes on)")
    elif s.paused_topics:
        parts.append(f"topics paused by an operator: {', '.join(s.paused_topics)}")
    if s.throttle_bytes_per_second:
        parts.append(
            f"throttled to {s.throttle_bytes_per_second:,} bytes/s, held back {s.throttled_ratio:.0%} of the "
            f"time since the report before (the lag below is partly the limit's)"
            if s.throttled_ratio >= 0.1
            else f"byte limit {s.throttle_bytes_per_second:,} bytes/s, not holding it back"
        )
    return "; ".join(parts)


def render_reports(
    reports: list[FlowReport], now_ms: int | None = None, *, all_partitions: bool = False, verdict: str | None = None
) -> None:
    """The human form of ``status``: a paragraph per flow, tables of lagging partitions and groups."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    console = Console(highlight=False, soft_wrap=True)
    if not console.is_terminal:
        console = Console(highlight=False, soft_wrap=True, width=400)  # piped: never cut a name
    for r in reports:
        console.print(Text.assemble((f"flow {r.flow}", "bold"), f" ({r.mode}): ", (r.state, "bold"), f" {r.detail}"))
        if r.status is not None and r.status.error and r.state != "failed":
            console.print(Text(f"  last error: {r.status.error}"))
        control = flow_control_line(r)
        if control:
            console.print(Text(f"  {control}"))
        lagging = [p for p in r.partitions if p.lag_records > 0]
        shown = r.partitions if all_partitions else lagging
        console.print(
            f"  {len(r.partitions)} partitions, {len(lagging)} lagging: {r.lag_records():,} records, "
            f"oldest waiting {r.lag_seconds(now_ms):,.1f}s"
        )
        if shown:
            table = Table(box=None, pad_edge=False, padding=(0, 2))
            for name in ("topic", "partition", "source end", "mirrored", "lag records", "lag seconds"):
                table.add_column(name, justify="left" if name == "topic" else "right")
            for p in shown:
                table.add_row(
                    f"{p.topic} (internal)" if p.topic in r.internal_topics else p.topic,
                    str(p.partition),
                    f"{p.source_end_offset:,}",
                    "-" if p.mirrored_offset < 0 else f"{p.mirrored_offset:,}",
                    f"{p.lag_records:,}",
                    f"{p.lag_seconds(now_ms):,.1f}",
                )
            console.print(table)
        if r.groups:
            table = Table(box=None, pad_edge=False, padding=(0, 2), title_justify="left")
            for name in ("group", "partitions", "checkpoint age"):
                table.add_column(name, justify="left" if name == "group" else "right")
            for g in r.groups:
                table.add_row(Text(g.group), str(g.partitions), f"{g.age_seconds(now_ms):,.0f}s")
            console.print(table)
    if verdict is not None:
        console.print(f"health: {verdict}")
