"""Where a flow's partitions start the first time sparkmirror runs them: its own state, MirrorMaker 2's,
or nothing, and never a silent copy over records that are already there.

The first start of a flow writes, for every partition, where it starts to the flow's progress group on
the target (a *claim*) before any record is copied: from then on sparkmirror has state of its own for
the partition, a restart resumes from it, and MM2's position is never adopted twice. Per partition
without state of sparkmirror's (no progress, no offset-map segment):

- MM2 committed a position for it (Connect's offsets topic): start where MM2 stopped (*adopt*);
- the remote partition holds no record: start at the source's log start, as ever;
- the remote partition holds records that neither says the origin of: refused (``Plan.conflicts``),
  unless the operator chose a way on: ``start-at-end`` (the source's end: what is on the target is
  taken as mirrored) or ``copy-again`` (the source's log start: every record copied again, knowingly).

MM2's position is taken only where it can be about this target: the remote partition has had
records (its end is past 0) and the position lies within the source partition's log. Otherwise it
is left aside (said in ``Plan.unusable``) and the rules above apply as if MM2 had none.

A partition with state of sparkmirror's adopts MM2's position only when sparkmirror handed it back
(``handback mm2`` marks its progress so: :data:`HANDED_BACK`) and MM2 ran after that: MM2's next
offset is past sparkmirror's, and the remote partition grew by at least the records in between.
An old position of MM2's (from before sparkmirror took over, or over a topic re-created since) is
never taken.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

PartitionKey = tuple[str, int]
#: The commit metadata ``handback mm2`` leaves on a partition's progress: MM2 may copy it from there on.
HANDED_BACK = "sparkmirror:handed-back-to-mm2"
#: What ``run`` does with a remote partition that holds records of unknown origin.
ExistingRecords = Literal["refuse", "start-at-end", "copy-again"]


def own_next(progress: int | None, tail: tuple[int, int, int] | None) -> int | None:
    """The next source offset sparkmirror's own state on the target says a partition was mirrored up to:
    the later of its progress (``None``: none) and the end of the offset map's last segment (``tail``:
    upstream start, downstream start, count; ``None``: none); ``None`` when it has neither.

    At least once a task writes its segments before its progress, so the map may be ahead of the
    progress, never behind; exactly once both commit in one transaction and agree, until an idle
    partition's progress expires (the progress group has no members: ``offsets.retention.minutes``
    after its last commit). The map's end (read ``read_committed``) then still says where it stands."""
    own = [o for o in (progress, tail[0] + tail[2] if tail is not None else None) if o is not None]
    return max(own) if own else None


@dataclass(frozen=True)
class PartitionState:
    """What is known of one source partition before its first start."""

    #: sparkmirror's own next source offset (progress, or the offset map's end); None: no state.
    own_next: int | None
    #: The remote partition's offset after the last record sparkmirror wrote (the offset map); None: unknown.
    own_written_end: int | None
    #: sparkmirror handed the partition back to MM2 (``handback mm2``) and has not copied it since.
    handed_back: bool
    #: MM2's next source offset (its committed offset plus one); None: MM2 has none.
    mm2_next: int | None
    #: The source partition's log start and end.
    source_start: int
    source_end: int
    #: Records the remote partition holds (end minus log start).
    remote_records: int
    remote_end: int


@dataclass
class Plan:
    """Per partition without state of its own: where it starts, and why."""

    adopted: dict[PartitionKey, int] = field(default_factory=dict)
    #: Fresh partitions (nothing on the target), and those started by the operator's choice.
    claimed: dict[PartitionKey, int] = field(default_factory=dict)
    #: Partitions whose remote partition holds records nothing explains: (records, remote end).
    conflicts: dict[PartitionKey, tuple[int, int]] = field(default_factory=dict)
    #: MM2 positions left aside, and why.
    unusable: dict[PartitionKey, str] = field(default_factory=dict)

    @property
    def starts(self) -> dict[PartitionKey, int]:
        return {**self.claimed, **self.adopted}


def plan_first_start(
    states: Mapping[PartitionKey, PartitionState],
    *,
    adopt: bool = True,
    existing: ExistingRecords = "refuse",
    shared_target: bool = False,
) -> Plan:
    """Decide where each partition without sparkmirror's state starts (see the module's docstring).

    ``shared_target``: remote topics other writers may write too (``IdentityReplicationPolicy``:
    aggregation, or local producers): their records say nothing of a copy, and are never refused.
    """
    plan = Plan()
    for key, s in sorted(states.items()):
        mm2 = _usable(key, s, plan) if adopt else None
        if s.own_next is not None:
            grew = s.own_written_end is None or s.remote_end - s.own_written_end >= (mm2 or 0) - s.own_next
            if s.handed_back and mm2 is not None and mm2 > s.own_next and grew:
                plan.adopted[key] = mm2  # MM2 ran after the hand-back
            continue
        if mm2 is not None:
            plan.adopted[key] = mm2
        elif s.remote_records <= 0 or shared_target or existing == "copy-again":
            plan.claimed[key] = s.source_start
        elif existing == "start-at-end":
            plan.claimed[key] = s.source_end
        else:
            plan.conflicts[key] = (s.remote_records, s.remote_end)
    return plan


def _usable(key: PartitionKey, s: PartitionState, plan: Plan) -> int | None:
    """MM2's next offset if it can be about this target and source, else None (said in ``plan.unusable``)."""
    if s.mm2_next is None:
        return None
    if s.remote_end <= 0:
        plan.unusable[key] = f"MM2's position {s.mm2_next} but the remote partition never held a record"
        return None
    if s.mm2_next > s.source_end:
        plan.unusable[key] = f"MM2's position {s.mm2_next} is past the source's end {s.source_end}"
        return None
    return s.mm2_next


def conflict_message(flow: str, target: str, plan: Plan, remote_name: Mapping[str, str], offsets_topic: str) -> str:
    """The refusal of a first start over records of unknown origin: which topics, their ends, the ways on."""
    by_topic: dict[str, list[tuple[int, int, int]]] = {}
    for (topic, partition), (records, end) in sorted(plan.conflicts.items()):
        by_topic.setdefault(topic, []).append((partition, records, end))
    shown = []
    for topic, parts in list(by_topic.items())[:5]:
        ends = ", ".join(f"[{p}] end {end} ({records:,} records)" for p, records, end in parts[:8])
        more = f" and {len(parts) - 8} more partitions" if len(parts) > 8 else ""
        shown.append(f"{remote_name.get(topic, topic)} {ends}{more}")
    more_topics = f"; and {len(by_topic) - 5} more topics" if len(by_topic) > 5 else ""
    return (
        f"flow={flow}: {'; '.join(shown)}{more_topics} on {target} already hold records, and neither "
        f"sparkmirror's progress nor MirrorMaker 2's committed offsets (Connect's offsets topic {offsets_topic} "
        "on the target) say where they came from; nothing was copied. Ways on: if MirrorMaker 2 (or a Connect "
        "cluster running MirrorSourceConnector) wrote them, adopt its position with --mm2-offsets-topic NAME; "
        "if they are the source's records up to now, start at the source's end with --existing-records "
        "start-at-end; to copy every record again after them, knowingly, --existing-records copy-again "
        "(docs/migrating-from-mm2.md)"
    )
