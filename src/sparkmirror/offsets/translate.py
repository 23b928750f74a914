"""Translate one consumer group's source positions to the target, from what the target holds.

Used by ``sparkmirror offsets translate`` (and by failover). The offset map is
read from the target to its end before anything is translated. The group's
positions come from the source cluster when it answers; otherwise from the
last checkpoints on the target, and the report says so.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from sparkmirror.config.model import FlowConfig
from sparkmirror.core.formats import Checkpoint
from sparkmirror.kafka.access import denied, principal
from sparkmirror.kafka.clients import validate_librdkafka
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.kafka.groups import committed_offsets
from sparkmirror.kafka.internal import read_to_end
from sparkmirror.offsets.store import OffsetMapStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionTranslation:
    source_topic: str
    partition: int
    source_offset: int
    remote_topic: str
    target_offset: int | None
    method: str
    missing: int
    explanation: str


@dataclass
class GroupTranslation:
    flow: str
    group: str
    positions_from: str  # "source" or "checkpoints"
    partitions: list[PartitionTranslation] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def source_positions(
    clients: FlowClients, group: str, partitions: list[tuple[str, int]], timeout_s: float = 10.0
) -> dict[tuple[str, int], int] | None:
    """The group's committed offsets on the source, or None when the source does not answer."""
    flow, conf = clients.flow, clients.source_consumer
    # A setting librdkafka refuses is a configuration error (exit 2), not an unreachable source:
    # falling back to checkpoints for it would translate stale positions without a word.
    validate_librdkafka(conf, role=f"flow={flow.name} source consumer", key_hint=f"{flow.source}.consumer")
    try:
        return committed_offsets({**conf, "log_level": "3"}, group, partitions, timeout_s=timeout_s)
    except Exception as exc:  # noqa: BLE001 - an unreachable source is an expected case here
        _raise_if_refused(clients)
        log.warning(
            "flow=%s source cluster %s did not answer (%s); using checkpoints on %s",
            flow.name,
            flow.source,
            str(exc).splitlines()[0][:200],
            flow.target,
        )
        return None


def _raise_if_refused(clients: FlowClients) -> None:
    """Wrong credentials are not a source that is down: say so instead of using checkpoints."""
    try:
        clients.source_admin.list_topics(timeout=2)
    except Exception:  # noqa: BLE001 - only the authentication report matters here
        pass
    found = clients.authentication_failure()
    if found is not None and found[0] == "source":
        flow = clients.flow
        raise denied(
            "authentication", found[1], flow=flow.name, cluster=flow.source,
            who=principal(clients.source_admin_config), operation="read the group's committed offsets",
        )  # fmt: skip


def checkpointed_positions(
    flow: FlowConfig, target_consumer_conf: Mapping[str, str]
) -> dict[str, dict[tuple[str, int], int]]:
    """Every group's last checkpointed upstream offset per *source* topic partition, read from the target."""
    topic = flow.policy.checkpoints_topic(flow.source)
    out: dict[str, dict[tuple[str, int], int]] = {}
    for key, value in read_to_end(target_consumer_conf, topic):
        if key is None or value is None:
            continue
        cp = Checkpoint.decode(key, value)
        upstream = flow.policy.upstream_topic(cp.topic) if flow.policy.topic_source(cp.topic) == flow.source else None
        out.setdefault(cp.group, {})[(upstream or cp.topic, cp.partition)] = cp.upstream_offset
    return out


def checkpoint_positions(clients: FlowClients, group: str) -> dict[tuple[str, int], int]:
    """The group's last checkpointed source offsets, read from the target (keyed by source topic)."""
    return checkpointed_positions(clients.flow, clients.target_consumer).get(group, {})


def translate_group(flow: FlowConfig, group: str) -> GroupTranslation:
    clients = FlowClients(flow)
    store = OffsetMapStore(clients)
    store.load()
    positions = source_positions(clients, group, store.map.partitions())
    origin = "source"
    if positions is None:
        positions = checkpoint_positions(clients, group)
        origin = "checkpoints"
    mirrored = {t for t, _p in store.map.partitions()}
    report = GroupTranslation(flow.name, group, origin)
    for (topic, partition), offset in sorted(positions.items()):
        if topic not in mirrored:
            continue
        tr = store.translate(topic, partition, offset)
        report.partitions.append(
            PartitionTranslation(
                source_topic=topic,
                partition=partition,
                source_offset=offset,
                remote_topic=flow.policy.format_remote_topic(flow.source, topic),
                target_offset=tr.downstream_offset,
                method=tr.method.name,
                missing=tr.missing,
                explanation=tr.explanation,
            )
        )
    return report
