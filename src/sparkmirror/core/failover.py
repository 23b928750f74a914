"""Failover and failback rules: where a moved group's positions come from, what to commit, when to refuse.

A *move* takes consumer groups from the cluster they consumed on (``origin``) to the cluster they
will resume on (``destination``): ``failover --source A --target B`` and ``failback --source B
--target A`` are the same operation with the roles named by the command. Each committed position
of a group on the origin is routed through one offset map (:func:`route`):

- **forward**: the topic is a source topic of the flow ``origin->destination``; its position is
  translated through that flow's offset map to the remote topic on the destination
  (``orders`` on A -> ``A.orders`` on B);
- **reverse**: the topic is the remote copy written by the flow ``destination->origin``; its
  position maps back through the inverse of that flow's offset map to the original topic
  (``A.orders`` on B -> ``orders`` on A, the failback of a group that read A's data on B).

The rules, each with a test named after it:

- **Empty groups only.** A group with members on the destination is refused, naming the members:
  committing under live consumers would race them (and the broker refuses it anyway).
- **Caught up, or forced.** When the origin answers, every partition routed forward must have
  all its records on the destination; otherwise the move is refused, stating per partition how
  many records would be missing, unless ``--force``.
- **Never backwards unless forced.** An offset the group already holds on the destination that
  is ahead of the translation was reached by consumers there: it is kept (:func:`decide_commit`).
- **No history, no commit.** A partition the offset map knows nothing about is reported and left.
- **Idempotent.** Running the same move twice commits nothing new the second time.

This module must never import pyspark or a Kafka client.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from sparkmirror.core.exceptions import CoreError
from sparkmirror.core.policy import ReplicationPolicy

__all__ = [
    "Action",
    "FailoverPlan",
    "GroupState",
    "PartitionMove",
    "Refusal",
    "RefusalKind",
    "Route",
    "decide_commit",
    "route",
]


class Direction(enum.Enum):
    """Which offset map a position goes through."""

    FORWARD = "forward"
    REVERSE = "reverse"


@dataclass(frozen=True)
class Route:
    """How a topic on the origin reaches the destination."""

    direction: Direction
    #: The flow whose offset map is used, ``X->Y``.
    flow: str
    #: The topic as that flow's offset map keys it (always the flow's *source* topic).
    map_topic: str
    #: The topic on the destination the group resumes in.
    destination_topic: str


def route(
    topic: str,
    origin: str,
    destination: str,
    *,
    forward_policy: ReplicationPolicy | None,
    forward_topics: Iterable[str] = (),
    reverse_policy: ReplicationPolicy | None,
    reverse_topics: Iterable[str] = (),
) -> Route | None:
    """The route of ``topic`` (on ``origin``) to ``destination``, or None when no flow carries it.

    ``forward_topics`` are the source topics the ``origin->destination`` flow has mirrored (its
    offset map's topics); ``reverse_topics`` those of ``destination->origin``. Forward wins when
    both match, which only an identity policy (same names on both sides) can produce.
    """
    if forward_policy is not None and topic in set(forward_topics):
        return Route(
            Direction.FORWARD,
            f"{origin}->{destination}",
            topic,
            forward_policy.format_remote_topic(origin, topic),
        )
    if reverse_policy is not None:
        reverse = set(reverse_topics)
        source = reverse_policy.topic_source(topic)
        original = reverse_policy.upstream_topic(topic) if source == destination else None
        if original is not None and original in reverse:
            return Route(Direction.REVERSE, f"{destination}->{origin}", original, original)
        if source is None and topic in reverse:  # identity policy: same name on both sides
            return Route(Direction.REVERSE, f"{destination}->{origin}", topic, topic)
    return None


class Action(enum.Enum):
    """What ``--execute`` does with one partition."""

    COMMIT = "commit"
    UNCHANGED = "unchanged"
    KEEP_AHEAD = "keep"
    REWIND = "rewind"
    NO_HISTORY = "no-history"


def decide_commit(existing: int | None, translated: int | None, *, force: bool) -> tuple[Action, str]:
    """Never backwards unless forced: what to do with one partition, and why (one line)."""
    if translated is None:
        return Action.NO_HISTORY, "no offset-map history for this partition; nothing committed"
    if existing is None:
        return Action.COMMIT, f"commit {translated} (no offset on the destination yet)"
    if existing == translated:
        return Action.UNCHANGED, f"already at {translated}"
    if existing < translated:
        return Action.COMMIT, f"commit {translated} (forward from {existing})"
    if force:
        return Action.REWIND, f"commit {translated}, rewinding from {existing} (--force)"
    return Action.KEEP_AHEAD, (
        f"keep {existing}: the group is already ahead of the translation {translated} on the destination "
        "(preventing rewind; --force rewinds)"
    )


@dataclass(frozen=True)
class PartitionMove:
    """One group's position in one partition, before and after the move."""

    group: str
    origin_topic: str
    partition: int
    #: The group's last known position on the origin (committed offset, or last checkpoint).
    origin_offset: int
    destination_topic: str
    #: The translated position on the destination; None without offset-map history.
    destination_offset: int | None
    #: ``forward`` or ``reverse`` and the flow whose map was used.
    via: str
    #: How the translation was found (the offset map's Method name).
    method: str
    #: Records of the origin partition not on the destination yet; None when unknown.
    missing: int | None
    #: The group's committed offset on the destination before the move, if any.
    existing: int | None
    action: Action
    reason: str
    explanation: str

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["action"] = self.action.value
        return out


@dataclass(frozen=True)
class GroupState:
    """A consumer group on the destination as the broker describes it."""

    group: str
    state: str
    #: (member id, client id, host) of each active member.
    members: tuple[tuple[str, str, str], ...] = ()

    @property
    def active(self) -> bool:
        return bool(self.members)


class RefusalKind(enum.Enum):
    """Why a move is refused; each has its own exit code."""

    ACTIVE_GROUPS = 3
    NOT_CAUGHT_UP = 4


@dataclass(frozen=True)
class Refusal:
    kind: RefusalKind
    message: str

    @property
    def exit_code(self) -> int:
        return self.kind.value


class FailoverRefused(CoreError):
    """A check failed; the message says which and what to do. Exit code by kind (3, 4)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def __reduce__(self) -> tuple[object, ...]:
        return (self.__class__, (self.args[0], self.exit_code))


@dataclass
class FailoverPlan:
    """Everything a move would do, and what the checks found. Built by :mod:`sparkmirror.failover`."""

    command: str
    origin: str
    destination: str
    #: Whether the origin answered; when not, positions come from checkpoints on the destination.
    origin_reachable: bool
    #: ``origin`` (committed offsets there) or ``checkpoints`` (last checkpoints on the destination).
    positions_from: str
    force: bool
    groups: list[str] = field(default_factory=list)
    moves: list[PartitionMove] = field(default_factory=list)
    #: Records not on the destination yet, per forward-routed origin partition (``topic[p]`` -> n).
    lag: dict[str, int] = field(default_factory=dict)
    destination_groups: dict[str, GroupState] = field(default_factory=dict)
    #: Topics with committed offsets that no flow carries to the destination (``group`` -> topics).
    unrouted: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    # -- checks --------------------------------------------------------------------------------
    def refusals(self) -> list[Refusal]:
        """The checks that fail, most fundamental first (active groups, then lag)."""
        out: list[Refusal] = []
        active = [g for g in self.groups if (s := self.destination_groups.get(g)) is not None and s.active]
        if active:
            lines = []
            for g in active:
                st = self.destination_groups[g]
                members = ", ".join(f"{m} (client {c}, host {h})" for m, c, h in st.members)
                lines.append(f"group {g} is {st.state} on {self.destination} with {len(st.members)} members: {members}")
            out.append(
                Refusal(
                    RefusalKind.ACTIVE_GROUPS,
                    "; ".join(lines) + f". Stop these consumers on {self.destination} first, then run again.",
                )
            )
        behind = {tp: n for tp, n in sorted(self.lag.items()) if n > 0}
        if behind and not self.force:
            total = sum(behind.values())
            detail = ", ".join(f"{tp}: {n}" for tp, n in behind.items())
            out.append(
                Refusal(
                    RefusalKind.NOT_CAUGHT_UP,
                    f"replication from {self.origin} to {self.destination} has not caught up: {total} records "
                    f"would be missing on {self.destination} ({detail}). Wait for the mirror to catch up, "
                    "or pass --force to move anyway (those records are then lost to the moved groups).",
                )
            )
        return out

    def check(self) -> None:
        """Raise :class:`FailoverRefused` for the first failed check (all are in the message)."""
        refusals = self.refusals()
        if refusals:
            raise FailoverRefused(" | ".join(r.message for r in refusals), refusals[0].exit_code)

    # -- what execute commits ------------------------------------------------------------------
    def commits(self) -> dict[str, dict[tuple[str, int], int]]:
        """Per group, the offsets ``--execute`` commits on the destination."""
        out: dict[str, dict[tuple[str, int], int]] = {}
        for m in self.moves:
            if m.action in (Action.COMMIT, Action.REWIND) and m.destination_offset is not None:
                out.setdefault(m.group, {})[(m.destination_topic, m.partition)] = m.destination_offset
        return out

    def summary(self) -> dict[str, int]:
        counts = {a.value: 0 for a in Action}
        for m in self.moves:
            counts[m.action.value] += 1
        counts["groups"] = len(self.groups)
        counts["partitions"] = len(self.moves)
        counts["missing_records"] = sum(n for n in self.lag.values() if n > 0)
        return counts

    def as_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "origin": self.origin,
            "destination": self.destination,
            "origin_reachable": self.origin_reachable,
            "positions_from": self.positions_from,
            "force": self.force,
            "groups": list(self.groups),
            "moves": [m.as_dict() for m in self.moves],
            "lag": dict(self.lag),
            "destination_groups": {
                g: {"state": s.state, "members": [list(m) for m in s.members]}
                for g, s in sorted(self.destination_groups.items())
            },
            "unrouted": self.unrouted,
            "refusals": [
                {"kind": r.kind.name.lower(), "exit_code": r.exit_code, "message": r.message} for r in self.refusals()
            ],
            "summary": self.summary(),
            "notes": list(self.notes),
        }


def missing_after(mirrored_end: int | None, log_start: int, log_end: int) -> tuple[int, int]:
    """The offset range ``[start, end)`` of an origin partition whose records are not on the
    destination: from the mirrored end (or the log start when nothing was mirrored) to the end."""
    start = log_start if mirrored_end is None else max(mirrored_end, log_start)
    return start, max(start, log_end)


def group_moves_by_group(moves: Iterable[PartitionMove]) -> Mapping[str, list[PartitionMove]]:
    out: dict[str, list[PartitionMove]] = {}
    for m in moves:
        out.setdefault(m.group, []).append(m)
    return out
