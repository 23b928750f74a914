"""Checkpoints: consumer groups' source positions, translated exactly, written to the target.

Every ``emit.checkpoints.interval.seconds`` the emitter reads the committed
offsets of the source groups that match ``groups``/``groups.exclude``,
translates each through the flow's offset map, and writes MM2 Checkpoint
records (key: group, remote topic, partition) to
``<source alias>.checkpoints.internal`` on the target, where Kafka's
``RemoteClusterUtils.translateOffsets`` and sparkmirror's failover read them.

Rules (their tests carry their names): nothing is emitted before the previous
checkpoints were read back (KAFKA-15905) and before the offset map was loaded
(KAFKA-13659); a checkpoint never moves backwards unless the source group
rewound; group offsets are synced only to empty or absent groups on the
target, and never backwards.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from sparkmirror.core.checkpoints import CheckpointState, group_offset_sync_decision
from sparkmirror.core.formats import Checkpoint
from sparkmirror.core.naming import is_own_group
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.kafka.groups import commit_offsets, committed_offsets, committed_positions
from sparkmirror.kafka.internal import COMPACTED, ensure_topic, produce_durably, read_to_end
from sparkmirror.offsets.store import OffsetMapStore

if TYPE_CHECKING:
    from confluent_kafka import Producer

log = logging.getLogger(__name__)


class CheckpointEmitter:
    """Checkpoints and group offset sync of one flow.

    ``internal_groups``: source groups never checkpointed besides the mirror's own
    (:func:`sparkmirror.core.naming.is_own_group`), which are always left out.
    """

    def __init__(
        self,
        clients: FlowClients,
        store: OffsetMapStore,
        *,
        internal_groups: frozenset[str] = frozenset(),
    ) -> None:
        self.clients = clients
        self.flow = flow = clients.flow
        self.store = store
        self.internal_groups = internal_groups
        self.topic = flow.policy.checkpoints_topic(flow.source)
        self.state = CheckpointState()
        self._producer: Producer | None = None
        #: Last translated position per (group, remote topic, partition), for the group sync.
        self.latest: dict[tuple[str, str, int], int] = {}

    def ensure_topic(self) -> None:
        ensure_topic(
            self.clients.target_admin,
            self.topic,
            replication_factor=self.flow.checkpoints_topic_replication_factor,
            config=COMPACTED,
            purpose=f"checkpoints of flow {self.flow.name}",
            key="checkpoints.topic.replication.factor",
        )

    def restore(self) -> int:
        """Read back what earlier runs emitted; required before emitting."""
        previous: list[Checkpoint] = []
        for key, value in read_to_end(self.clients.target_consumer, self.topic):
            if key is None or value is None:
                continue
            previous.append(Checkpoint.decode(key, value))
        self.state.restore(previous)
        for cp in previous:
            self.latest[(cp.group, cp.topic, cp.partition)] = cp.downstream_offset
        log.info("flow=%s restored %d checkpoints from %s", self.flow.name, len(self.state), self.topic)
        return len(self.state)

    # -- source groups -------------------------------------------------------
    def source_groups(self) -> list[str]:
        result = self.clients.source_admin.list_consumer_groups(request_timeout=30).result()
        names = sorted(g.group_id for g in result.valid)
        return [
            g
            for g in names
            if g not in self.internal_groups and not is_own_group(g) and self.flow.group_filter.matches(g)
        ]

    # -- emission ------------------------------------------------------------
    def emit(self, mirrored: dict[str, int], *, write: bool = True) -> int:
        """One pass over the source groups (``mirrored``: topic -> partitions); returns checkpoints written.

        With ``write=False`` only the translations the group offset sync uses
        are refreshed (checkpoints disabled, offset sync enabled).
        """
        t0 = time.monotonic()
        out: list[Checkpoint] = []
        partitions = [(t, p) for t, n in sorted(mirrored.items()) for p in range(n)]
        for group in self.source_groups():
            try:
                positions = committed_positions(self.clients.source_consumer, group, partitions, timeout_s=10)
            except Exception as exc:  # noqa: BLE001 - one group's trouble must not stop the others
                log.warning(
                    "flow=%s cannot read the offsets of group %s on %s: %s",
                    self.flow.name,
                    group,
                    self.flow.source,
                    exc,
                )
                continue
            for (topic, partition), (upstream, metadata) in sorted(positions.items()):
                translation = self.store.translate(topic, partition, upstream)
                remote = self.flow.policy.format_remote_topic(self.flow.source, topic)
                if not write:
                    if translation.downstream_offset is not None:
                        self.latest[(group, remote, partition)] = translation.downstream_offset
                    continue
                cp = self.state.next_checkpoint(group, remote, partition, upstream, translation, metadata)
                if cp is not None:
                    out.append(cp)
                    self.latest[(group, remote, partition)] = cp.downstream_offset
        if out:
            self._write(out)
        log.debug(
            "flow=%s emitted %d checkpoints in %.0fms",
            self.flow.name,
            len(out),
            (time.monotonic() - t0) * 1000,
        )
        return len(out)

    def _write(self, checkpoints: list[Checkpoint]) -> None:
        if self._producer is None:
            from sparkmirror.kafka.factory import new_producer

            self._producer = new_producer({**self.clients.internal_producer, "linger.ms": "5"})
        produce_durably(
            self._producer,
            self.topic,
            ((cp.key_bytes(), cp.value_bytes()) for cp in checkpoints),
            what=f"flow={self.flow.name}: checkpoints",
        )

    def close(self) -> None:
        """Let go of the checkpoint producer (its writes were durable when they returned)."""
        self._producer = None

    # -- group offset sync ----------------------------------------------------
    def sync_group_offsets(self) -> int:
        """Commit translated offsets to empty or absent groups on the target; never backwards."""
        by_group: dict[str, dict[tuple[str, int], int]] = {}
        for (group, remote, partition), downstream in self.latest.items():
            by_group.setdefault(group, {})[(remote, partition)] = downstream
        if not by_group:
            return 0
        described = self.clients.target_admin.describe_consumer_groups(sorted(by_group), request_timeout=30)
        committed = 0
        for group, fut in described.items():
            try:
                members = fut.result().members
            except Exception:  # noqa: BLE001 - an absent group is described as empty or errors; both are absent
                members = []
            active = bool(members)
            if active:
                log.info(
                    "flow=%s group %s has %d active members on %s; not syncing its offsets",
                    self.flow.name,
                    group,
                    len(members),
                    self.flow.target,
                )
                continue
            current = committed_offsets(self.clients.target_consumer, group, list(by_group[group]))
            commits: dict[tuple[str, int], int] = {}
            for (remote, partition), downstream in sorted(by_group[group].items()):
                ok, reason = group_offset_sync_decision(current.get((remote, partition)), downstream, active)
                log.debug("flow=%s group %s %s[%d]: %s", self.flow.name, group, remote, partition, reason)
                if ok:
                    commits[(remote, partition)] = downstream
            if commits:
                commit_offsets(self.clients.target_consumer, group, commits)
                committed += len(commits)
                log.info(
                    "flow=%s synced %d offsets of group %s to %s",
                    self.flow.name,
                    len(commits),
                    group,
                    self.flow.target,
                )
        return committed
