"""`sparkmirror offsets translate`: a group's source positions as target offsets."""

from __future__ import annotations

import json
from pathlib import Path

import click

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
