"""How a plan reads to an operator: a table per group and partition, notes, a summary line."""

from __future__ import annotations

from sparkmirror.core.failover import FailoverPlan, group_moves_by_group

RESET_REMINDER = (
    "reminder: set auto.offset.reset deliberately on the consumers that resume on {dst}: records may have "
    "expired there (retention), and a position below the log start falls back to that setting"
)


def _num(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


def render(plan: FailoverPlan, *, executed: int | None = None) -> str:
    """The plan as text (the ``--json`` report carries the same facts)."""
    src, dst = plan.origin, plan.destination
    lines = [
        f"{plan.command} {src} -> {dst}: positions from "
        + (f"the groups' committed offsets on {src}" if plan.origin_reachable else f"the last checkpoints on {dst}")
    ]
    header = (
        f"  {'topic[partition] on ' + src:<34} {'topic on ' + dst:<26} {'offset on ' + src:>14} "
        f"{'offset on ' + dst:>14} {'not on ' + dst:>10}  action"
    )
    for group, moves in sorted(group_moves_by_group(plan.moves).items()):
        state = plan.destination_groups.get(group)
        lines.append(f"group {group}" + (f" ({state.state} on {dst})" if state is not None else ""))
        lines.append(header)
        for m in moves:
            lines.append(
                f"  {m.origin_topic + f'[{m.partition}]':<34} {m.destination_topic:<26} {m.origin_offset:>14,} "
                f"{_num(m.destination_offset):>14} {_num(m.missing):>10}  {m.action.value}: {m.reason}"
            )
    for group in plan.groups:
        if group not in {m.group for m in plan.moves}:
            lines.append(f"group {group}: no position in a topic that reaches {dst}")
    for group, topics in sorted(plan.unrouted.items()):
        lines.append(f"group {group}: not moved, no flow carries {', '.join(sorted(topics))} to {dst}")
    for note in plan.notes:
        lines.append(f"note: {note}")
    s = plan.summary()
    lines.append(
        f"summary: {s['groups']} groups, {s['partitions']} partitions: {s['commit'] + s['rewind']} to commit, "
        f"{s['unchanged']} unchanged, {s['keep']} kept (ahead on {dst}), {s['no-history']} without history; "
        f"records not on {dst}: " + (f"{s['missing_records']:,}" if plan.origin_reachable else "unknown")
    )
    refusals = plan.refusals()
    if executed is not None:
        lines.append(f"executed: committed {executed} offsets on {dst}")
    elif not refusals:
        lines.append("plan only: run again with --execute to commit these offsets")
    lines.append(RESET_REMINDER.format(dst=dst))
    return "\n".join(lines)
