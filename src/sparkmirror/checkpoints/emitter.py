"""Checkpoints: consumer groups' source positions, translated exactly, written to the target.

Every ``emit.checkpoints.interval.seconds`` the emitter reads the committed
offsets of the source groups that match ``groups``/``groups.exclude`` (all of
them at once, through :class:`~sparkmirror.kafka.groupreader.GroupOffsetReader`;
a group it could not read goes through a consumer of its own), translates each
through the flow's offset map, and writes MM2 Checkpoint
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
from sparkmirror.core.offsetmap import Method
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.kafka.groupreader import GroupOffsetReader, Positions
from sparkmirror.kafka.groups import commit_offsets, committed_positions
from sparkmirror.kafka.internal import COMPACTED_READ_BACK, ensure_topic, produce_durably, read_to_end
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
        self._readers: dict[str, GroupOffsetReader] = {}
        #: Last translated position per (group, remote topic, partition), for the group sync.
        self.latest: dict[tuple[str, str, int], int] = {}
        #: (group, topic, partition) checkpointed below the offset map's retained history: warned once
        #: when they fall below it, not at every pass.
        self.below_history: set[tuple[str, str, int]] = set()
        #: Per group, the wall clock (time.time()) of the last pass that read its offsets and left its
        #: checkpoints current on the target (written, or unchanged since): the metrics' freshness.
        self.confirmed: dict[str, float] = {}

    def ensure_topic(self) -> None:
        ensure_topic(
            self.clients.target_admin,
            self.topic,
            replication_factor=self.flow.checkpoints_topic_replication_factor,
            config=COMPACTED_READ_BACK,
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
        """One whole pass over the source groups (``mirrored``: topic -> partitions); returns checkpoints
        written. The flow's chore reads a pass in slices instead (:meth:`begin_pass`, :meth:`emit_groups`).

        With ``write=False`` only the translations the group offset sync uses
        are refreshed (checkpoints disabled, offset sync enabled).
        """
        groups = self.begin_pass(write=write)
        return self.emit_groups(mirrored, groups, write=write)

    def begin_pass(self, *, write: bool = True) -> list[str]:
        """The source groups of a new pass; a group gone from the source is no longer watched."""
        groups = self.source_groups()
        if write:
            listed = set(groups)
            self.confirmed = {g: at for g, at in self.confirmed.items() if g in listed}
            self.below_history = {key for key in self.below_history if key[0] in listed}
        return groups

    def emit_groups(self, mirrored: dict[str, int], groups: list[str], *, write: bool = True) -> int:
        """Read ``groups``' offsets, translate them, write the checkpoints that changed; returns how many."""
        t0 = time.monotonic()
        out: list[Checkpoint] = []
        partitions = [(t, p) for t, n in sorted(mirrored.items()) for p in range(n)]
        t_read = time.monotonic()
        read = self.group_positions("source", groups, partitions) if groups else {}
        t_read = time.monotonic() - t_read
        below: list[tuple[tuple[str, str, int], str]] = []
        for group in groups:
            positions = read.get(group)
            if positions is None:
                continue
            for (topic, partition), (upstream, metadata) in sorted(positions.items()):
                translation = self.store.translate(topic, partition, upstream)
                key = (group, topic, partition)
                if translation.method is Method.BELOW_HISTORY:
                    if key not in self.below_history:
                        below.append((key, translation.explanation))
                else:
                    self.below_history.discard(key)
                remote = self.flow.policy.format_remote_topic(self.flow.source, topic)
                if not write:
                    if translation.downstream_offset is not None:
                        self.latest[(group, remote, partition)] = translation.downstream_offset
                    continue
                cp = self.state.next_checkpoint(group, remote, partition, upstream, translation, metadata)
                if cp is not None:
                    out.append(cp)
                    self.latest[(group, remote, partition)] = cp.downstream_offset
        if below:
            self.below_history.update(key for key, _ in below)
            log.warning(
                "flow=%s %d group partition(s) are below the offset map's retained history and are checkpointed "
                "at its earliest offset; the target may lack their older records (said once): %s",
                self.flow.name,
                len(below),
                "; ".join(f"group {g}: {why}" for (g, _t, _p), why in below[:3]) + (" …" if len(below) > 3 else ""),
            )
        if out:
            self._write(out)
        if write:
            now = time.time()
            self.confirmed.update((group, now) for group in groups if group in read)
        log.debug(
            "flow=%s emitted %d checkpoints for %d groups in %.0fms (group offsets read in %.0fms)",
            self.flow.name,
            len(out),
            len(groups),
            (time.monotonic() - t0) * 1000,
            t_read * 1000,
        )
        return len(out)

    def group_positions(self, side: str, groups: list[str], partitions: list[tuple[str, int]]) -> dict[str, Positions]:
        """Committed positions on ``partitions`` of each of ``groups`` on the ``source`` or ``target`` cluster.

        All groups are read at once by the cluster's :class:`GroupOffsetReader`; a group it could not
        read is read again through a consumer of its own (the path that survives coordinator moves).
        A group unreadable both ways is left out with a warning: its checkpoints wait for the next pass.
        """
        wanted = set(partitions)
        reads = self._reader(side).read(groups, timeout_s=10)
        out = {g: {tp: pos for tp, pos in found.items() if tp in wanted} for g, found in reads.positions.items()}
        cluster = self.flow.source if side == "source" else self.flow.target
        conf = self.clients.source_consumer if side == "source" else self.clients.target_consumer
        for group, why in reads.failed.items():
            log.info("flow=%s group %s on %s: %s; reading it through a consumer", self.flow.name, group, cluster, why)
            try:
                out[group] = committed_positions(conf, group, partitions, timeout_s=10)
            except Exception as exc:  # noqa: BLE001 - one group's trouble must not stop the others
                log.warning(
                    "flow=%s cannot read the offsets of group %s on %s: %s", self.flow.name, group, cluster, exc
                )
        return out

    def _reader(self, side: str) -> GroupOffsetReader:
        reader = self._readers.get(side)
        if reader is None:
            conf = self.clients.source_admin_config if side == "source" else self.clients.target_admin_config
            reader = GroupOffsetReader(conf, name=f"flow={self.flow.name} {side}: ")
            self._readers[side] = reader
        return reader

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
        """Let go of the checkpoint producer (its writes were durable when they returned) and the readers."""
        self._producer = None
        for reader in self._readers.values():
            reader.close()
        self._readers.clear()

    # -- group offset sync ----------------------------------------------------
    def sync_group_offsets(self) -> int:
        """Commit translated offsets to empty or absent groups on the target; never backwards."""
        by_group: dict[str, dict[tuple[str, int], int]] = {}
        for (group, remote, partition), downstream in self.latest.items():
            by_group.setdefault(group, {})[(remote, partition)] = downstream
        if not by_group:
            return 0
        described = self.clients.target_admin.describe_consumer_groups(sorted(by_group), request_timeout=30)
        idle: list[str] = []
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
            idle.append(group)
        targets = sorted({tp for group in idle for tp in by_group[group]})
        current_positions = self.group_positions("target", idle, targets)
        for group in idle:
            if group not in current_positions:
                continue  # unreadable: never commit over offsets we could not see
            current = {tp: offset for tp, (offset, _meta) in current_positions[group].items()}
            commits: dict[tuple[str, int], int] = {}
            for (remote, partition), downstream in sorted(by_group[group].items()):
                ok, reason = group_offset_sync_decision(current.get((remote, partition)), downstream, False)
                log.debug("flow=%s group %s %s[%d]: %s", self.flow.name, group, remote, partition, reason)
                if ok:
                    commits[(remote, partition)] = downstream
            if commits:
                try:
                    commit_offsets(self.clients.target_consumer, group, commits)
                except Exception as exc:  # noqa: BLE001 - one group's trouble must not stop the others
                    # e.g. a checkpoint restored for a remote topic deleted since: the other groups still sync.
                    log.warning(
                        "flow=%s cannot sync the offsets of group %s to %s: %s",
                        self.flow.name,
                        group,
                        self.flow.target,
                        exc,
                    )
                    continue
                committed += len(commits)
                log.info(
                    "flow=%s synced %d offsets of group %s to %s",
                    self.flow.name,
                    len(commits),
                    group,
                    self.flow.target,
                )
        return committed
