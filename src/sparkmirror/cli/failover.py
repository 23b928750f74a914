"""`sparkmirror failover` and `sparkmirror failback`: move consumer groups between clusters.

Exit codes: 0 done (or a plan whose checks pass), 2 configuration or usage error, 3 a group is
active on the destination, 4 replication has not caught up (without ``--force``), 1 anything else.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click


def _options(func: Callable[..., Any]) -> Callable[..., Any]:
    decorators = [
        click.argument("config", type=click.Path(exists=True, dir_okay=False, path_type=Path)),
        click.option("--source", required=True, help="Cluster the groups consumed on (the one they leave)."),
        click.option("--target", required=True, help="Cluster the groups resume on."),
        click.option("--groups", "groups", default=None, help="Regex of group ids (full match); default: the flow's."),
        click.option("--execute", is_flag=True, help="Commit the translated offsets (default: plan only)."),
        click.option(
            "--force",
            is_flag=True,
            help="Move even when replication has not caught up, and rewind offsets already ahead on the target.",
        ),
        click.option("--json", "as_json", is_flag=True, help="Print the report as JSON."),
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def _run(
    command: str, config: Path, source: str, target: str, groups: str | None, execute: bool, force: bool, as_json: bool
) -> None:
    from sparkmirror.config import load_config
    from sparkmirror.core.failover import FailoverRefused
    from sparkmirror.failover.apply import apply_plan
    from sparkmirror.failover.plan import build_plan
    from sparkmirror.failover.report import render

    cfg = load_config(config)
    plan = build_plan(cfg, command=command, origin=source, destination=target, groups_pattern=groups, force=force)
    refusals = plan.refusals()
    executed: int | None = None
    if execute and not refusals:
        executed = apply_plan(cfg, plan)
    if as_json:
        report = plan.as_dict()
        report["executed"] = executed
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(render(plan, executed=executed))
    if refusals:
        raise FailoverRefused(" | ".join(r.message for r in refusals), refusals[0].exit_code)


@click.command()
@_options
def failover(
    config: Path, source: str, target: str, groups: str | None, execute: bool, force: bool, as_json: bool
) -> None:
    """Move consumer groups from SOURCE (lost or leaving) to TARGET at their exact positions.

    Plans by default; --execute commits. Refuses while a group has members on TARGET, or while
    records of SOURCE are not on TARGET yet (unless --force). When SOURCE does not answer, the plan
    comes from TARGET's checkpoints and offset map.
    """
    _run("failover", config, source, target, groups, execute, force, as_json)


@click.command()
@_options
def failback(
    config: Path, source: str, target: str, groups: str | None, execute: bool, force: bool, as_json: bool
) -> None:
    """Move consumer groups back from SOURCE (e.g. B) to TARGET (e.g. A) after TARGET returned.

    Positions in SOURCE's copies of TARGET's topics map back through the inverse of the
    TARGET->SOURCE offset map; positions in topics produced on SOURCE map through the
    SOURCE->TARGET flow's map. Same plan, checks and --execute as failover.
    """
    _run("failback", config, source, target, groups, execute, force, as_json)
