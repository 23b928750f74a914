"""Build a failover or failback plan from what the clusters hold; never writes to a cluster.

The rules (routes, checks, no rewind) live in :mod:`sparkmirror.core.failover`; this module
gathers their inputs: the groups and their positions on the origin (or, when the origin does
not answer, their last checkpoints on the destination), the offset maps of the flows between
the two clusters (each read to its end before anything is translated), how many records of
each origin partition are not on the destination yet, the destination's group states and the
offsets the groups already hold there.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

from sparkmirror.config.model import ClusterConfig, FlowConfig, MirrorConfig
from sparkmirror.core.failover import (
    Direction,
    FailoverPlan,
    GroupState,
    PartitionMove,
    Route,
    decide_commit,
    missing_after,
    route,
)
from sparkmirror.core.naming import is_own_group
from sparkmirror.core.offsetmap import OffsetMap
from sparkmirror.errors import ConfigError
from sparkmirror.kafka.access import denied, principal
from sparkmirror.kafka.flowclients import ClusterClients
from sparkmirror.kafka.groups import committed_offsets
from sparkmirror.kafka.inspect import count_records, partition_bounds
from sparkmirror.offsets.store import read_offset_map
from sparkmirror.offsets.translate import checkpointed_positions

log = logging.getLogger(__name__)

#: How long the origin may take to answer before the plan is made from the destination alone.
REACHABLE_TIMEOUT_S = 10.0


class Cluster(ClusterClients):
    """One cluster as a plan reads it: quiet clients with checked settings, partition bounds asked once.

    Its repr names the alias only (the settings it holds carry credentials).
    """

    def __init__(self, cluster: ClusterConfig) -> None:
        super().__init__(cluster, quiet=True)
        # Refused settings are configuration errors (exit 2), never "the cluster does not answer".
        self.validate()
        self._bounds: dict[tuple[str, int], tuple[int, int]] = {}

    @classmethod
    def of(cls, cfg: MirrorConfig, alias: str) -> Cluster:
        cluster = cfg.clusters.get(alias)
        if cluster is None or not cluster.bootstrap_servers:
            raise ConfigError(
                f"cluster {alias} has no bootstrap.servers in the configuration", key=f"{alias}.bootstrap.servers"
            )
        return cls(cluster)

    def reachable(self, timeout_s: float = REACHABLE_TIMEOUT_S) -> bool:
        try:
            self.admin.list_topics(timeout=timeout_s)
        except Exception as exc:  # noqa: BLE001 - an unreachable cluster is an expected case here
            refused = self.authentication_failure()
            if refused is not None:
                # Wrong credentials are not a cluster that is down: planning from the other side
                # alone would be a mistake.
                raise denied(
                    "authentication",
                    refused,
                    flow=None,
                    cluster=self.alias,
                    who=principal(self.admin_config),
                    operation="describe the cluster",
                ) from None
            log.warning("cluster %s does not answer: %s", self.alias, str(exc).splitlines()[0][:200])
            return False
        return True

    def bounds(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start, high watermark) of ``topic[partition]``, asked once per plan (many groups share it)."""
        key = (topic, partition)
        if key not in self._bounds:
            self._bounds[key] = partition_bounds(self.consumer, topic, partition)
        return self._bounds[key]

    def topics(self) -> dict[str, int]:
        md = self.admin.list_topics(timeout=30)
        return {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}


def _group_selector(pattern: str | None, flow: FlowConfig | None) -> Callable[[str], bool]:
    if pattern is not None:
        try:
            rx = re.compile(pattern)
        except re.error as exc:
            raise ConfigError(
                f"--groups {pattern!r} is not a valid regular expression: {exc}", key="--groups"
            ) from None
        return lambda g: rx.fullmatch(g) is not None
    if flow is not None:
        return flow.group_filter.matches
    return lambda _g: True


def describe_groups(cluster: Cluster, groups: list[str]) -> dict[str, GroupState]:
    if not groups:
        return {}
    out: dict[str, GroupState] = {}
    futures = cluster.admin.describe_consumer_groups(groups, request_timeout=30)
    for group, fut in futures.items():
        try:
            desc = fut.result()
        except Exception:  # noqa: BLE001 - an absent group is reported as an error by some brokers
            out[group] = GroupState(group, "absent")
            continue
        state = getattr(desc.state, "name", str(desc.state)).lower()
        members = tuple((m.member_id, m.client_id, m.host) for m in (desc.members or []))
        out[group] = GroupState(group, state, members)
    return out


def build_plan(
    cfg: MirrorConfig,
    *,
    command: str,
    origin: str,
    destination: str,
    groups_pattern: str | None = None,
    force: bool = False,
) -> FailoverPlan:
    """Plan moving the selected groups from ``origin`` to ``destination`` (see the module doc)."""
    if origin == destination:
        raise ConfigError(f"--source and --target are the same cluster ({origin})", key="--target")
    forward = cfg.find_flow(origin, destination)
    reverse = cfg.find_flow(destination, origin)
    if forward is None and reverse is None:
        raise ConfigError(
            f"no flow between {origin} and {destination} in the configuration "
            f"(expected {origin}->{destination} or {destination}->{origin})",
            key=f"{origin}->{destination}.enabled",
        )
    src = Cluster.of(cfg, origin)
    dst = Cluster.of(cfg, destination)
    reachable = src.reachable()
    plan = FailoverPlan(
        command=command,
        origin=origin,
        destination=destination,
        origin_reachable=reachable,
        positions_from="origin" if reachable else "checkpoints",
        force=force,
    )

    # Offset maps: forward stored on the destination, reverse stored on the origin.
    forward_map = read_offset_map(dst.consumer, forward) if forward is not None else None
    reverse_map: OffsetMap | None = None
    if reverse is not None:
        if reachable:
            reverse_map = read_offset_map(src.consumer, reverse)
        else:
            plan.notes.append(
                f"{origin} does not answer: the {reverse.name} offset map (stored on {origin}) is not readable, "
                f"so positions in topics {origin} received from {destination} cannot be moved"
            )

    origin_topics = src.topics() if reachable else {}
    forward_topics: set[str] = set()
    if forward is not None and forward_map is not None:
        forward_topics = {t for t, _p in forward_map.partitions()}
        forward_topics |= {t for t in origin_topics if forward.replicates(t, heartbeats=False)}
    reverse_topics = {t for t, _p in reverse_map.partitions()} if reverse_map is not None else set()

    def route_of(topic: str) -> Route | None:
        return route(
            topic,
            origin,
            destination,
            forward_policy=forward.policy if forward is not None else None,
            forward_topics=forward_topics,
            reverse_policy=reverse.policy if reverse is not None else None,
            reverse_topics=reverse_topics,
        )

    select = _group_selector(groups_pattern, forward or reverse)
    positions = _origin_positions(plan, src, dst, forward, select, origin_topics, route_of)
    plan.groups = sorted(positions)
    if not reachable:
        plan.notes.append(
            f"{origin} does not answer: planned from what {destination} holds (the last checkpoints of each group "
            f"and the offset map). A group that committed after its last checkpoint re-reads those records on "
            f"{destination}; records not mirrored before {origin} was lost cannot be counted."
        )

    if reachable and forward_map is not None:
        _measure_lag(plan, src, forward_map, {t: origin_topics.get(t, 0) for t in forward_topics}, positions)

    plan.destination_groups = describe_groups(dst, plan.groups)
    if reachable:
        for group, state in sorted(describe_groups(src, plan.groups).items()):
            if state.active:
                plan.notes.append(
                    f"group {group} still has {len(state.members)} active members on {origin}: its position there "
                    f"moves on after this plan; stop its consumers on {origin} before --execute"
                )
    destination_topics = dst.topics()
    for group in plan.groups:
        routed: list[tuple[str, Route, int, int]] = []
        for (topic, partition), offset in sorted(positions[group].items()):
            r = route_of(topic)
            if r is None or r.destination_topic not in destination_topics:
                plan.unrouted.setdefault(group, [])
                if topic not in plan.unrouted[group]:
                    plan.unrouted[group].append(topic)
                continue
            routed.append((topic, r, partition, offset))
        existing = committed_offsets(dst.consumer, group, [(r.destination_topic, p) for _t, r, p, _o in routed])
        for topic, r, partition, offset in routed:
            plan.moves.append(_move(plan, group, topic, r, partition, offset, existing, forward_map, reverse_map, dst))
    return plan


def _origin_positions(
    plan: FailoverPlan,
    src: Cluster,
    dst: Cluster,
    forward: FlowConfig | None,
    select: Callable[[str], bool],
    origin_topics: dict[str, int],
    route_of: Callable[[str], Route | None],
) -> dict[str, dict[tuple[str, int], int]]:
    """Each selected group's positions in topics some flow carries to the destination."""
    if not plan.origin_reachable:
        if forward is None:
            return {}
        checkpointed = checkpointed_positions(forward, dst.consumer)
        return {g: pos for g, pos in checkpointed.items() if select(g) and not is_own_group(g)}
    listed = src.admin.list_consumer_groups(request_timeout=30).result()
    names = sorted(g.group_id for g in listed.valid if not is_own_group(g.group_id))
    partitions = [(t, p) for t, n in sorted(origin_topics.items()) if route_of(t) is not None for p in range(n)]
    out: dict[str, dict[tuple[str, int], int]] = {}
    for group in names:
        if not select(group):
            continue
        offsets = committed_offsets(src.consumer, group, partitions)
        if offsets:
            out[group] = offsets
    return out


def _measure_lag(
    plan: FailoverPlan,
    src: Cluster,
    forward_map: OffsetMap,
    topics: dict[str, int],
    positions: dict[str, dict[tuple[str, int], int]],
) -> None:
    """Records not on the destination yet, for every partition of the topics the groups read."""
    used = {t for pos in positions.values() for (t, _p) in pos}
    for topic in sorted(used & set(topics)):
        for partition in range(topics[topic]):
            log_start, log_end = src.bounds(topic, partition)
            start, end = missing_after(forward_map.upstream_end(topic, partition), log_start, log_end)
            plan.lag[f"{topic}[{partition}]"] = (
                count_records(src.consumer, topic, partition, start, end) if end > start else 0
            )


def _move(
    plan: FailoverPlan,
    group: str,
    topic: str,
    r: Route,
    partition: int,
    offset: int,
    existing: dict[tuple[str, int], int],
    forward_map: OffsetMap | None,
    reverse_map: OffsetMap | None,
    dst: Cluster,
) -> PartitionMove:
    if r.direction is Direction.FORWARD:
        assert forward_map is not None
        tr = forward_map.translate(r.map_topic, partition, offset)
        target = tr.downstream_offset
        missing = plan.lag.get(f"{r.map_topic}[{partition}]") if plan.origin_reachable else None
    else:
        assert reverse_map is not None
        tr = reverse_map.reverse_translate(r.map_topic, partition, offset)
        target = tr.upstream_offset
        # The records came from the destination: it lacks some only if it came back from a
        # disaster with less than it had, and then the translated position is past its end.
        missing = 0
        if target is not None:
            _start, end = dst.bounds(r.destination_topic, partition)
            missing = max(0, target - end)
            if missing:
                plan.lag[f"{r.destination_topic}[{partition}]"] = missing
    current = existing.get((r.destination_topic, partition))
    action, reason = decide_commit(current, target, force=plan.force)
    return PartitionMove(
        group=group,
        origin_topic=topic,
        partition=partition,
        origin_offset=offset,
        destination_topic=r.destination_topic,
        destination_offset=target,
        via=f"{r.direction.value} ({r.flow} offset map)",
        method=tr.method.name,
        missing=missing,
        existing=current,
        action=action,
        reason=reason,
        explanation=tr.explanation,
    )
