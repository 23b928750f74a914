"""Remote topics on the target: create them, grow them, copy their configs.

A record may only be written once its remote topic exists on the target with
at least as many partitions as its source topic, because the mirror keeps
partition numbers. This module makes that true before the pipeline writes,
and afterwards keeps the remote topics' configs in line with the source's
(minus ``config.properties.exclude``).

It never deletes a topic, never lowers a partition count, and never touches a
topic on the target that the replication policy does not map from the source.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sparkmirror.errors import SparkMirrorError
from sparkmirror.kafka.flowclients import FlowClients

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient, TopicMetadata

log = logging.getLogger(__name__)

_TIMEOUT_S = 30.0


class TopicSyncError(SparkMirrorError):
    """A remote topic could not be created or altered."""

    retriable = True


@dataclass
class SyncReport:
    created: list[str] = field(default_factory=list)
    grown: dict[str, tuple[int, int]] = field(default_factory=dict)
    configs_updated: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.created or self.grown or self.configs_updated)


class TopicSync:
    """Keeps the remote topics of one flow in step with the source."""

    def __init__(self, clients: FlowClients) -> None:
        self.flow = clients.flow
        self.clients = clients

    @property
    def source_admin(self) -> AdminClient:
        return self.clients.source_admin

    @property
    def target_admin(self) -> AdminClient:
        return self.clients.target_admin

    # -- what to mirror -----------------------------------------------------
    def source_topics(self) -> dict[str, int]:
        """Source topics this flow mirrors, with their partition counts."""
        md = self.source_admin.list_topics(timeout=_TIMEOUT_S)
        out: dict[str, int] = {}
        for name, tmd in md.topics.items():
            if tmd.error is not None:
                continue
            if self.flow.replicates(name):
                out[name] = len(tmd.partitions)
        return dict(sorted(out.items()))

    def remote_name(self, topic: str) -> str:
        return self.flow.policy.format_remote_topic(self.flow.source, topic)

    # -- make the target ready ----------------------------------------------
    def sync(self, topics: dict[str, int], *, configs: bool | None = None) -> SyncReport:
        """Create missing remote topics, add missing partitions, copy configs."""
        report = SyncReport()
        if not topics:
            return report
        copy_configs = self.flow.sync_topic_configs_enabled if configs is None else configs
        target_md = self.target_admin.list_topics(timeout=_TIMEOUT_S).topics
        source_configs = self._source_configs(topics) if copy_configs else {}
        self._create_missing(topics, target_md, source_configs, report)
        self._grow(topics, target_md, report)
        if copy_configs:
            existing = [t for t in topics if self.remote_name(t) in target_md]
            self._alter_configs(existing, source_configs, report)
        return report

    def _create_missing(
        self,
        topics: dict[str, int],
        target_md: dict[str, TopicMetadata],
        source_configs: dict[str, dict[str, str]],
        report: SyncReport,
    ) -> None:
        from confluent_kafka.admin import NewTopic

        new = []
        for topic, partitions in topics.items():
            remote = self.remote_name(topic)
            if remote in target_md:
                continue
            new.append(
                NewTopic(
                    remote,
                    num_partitions=partitions,
                    replication_factor=int(self.flow.replication_factor),
                    config=source_configs.get(topic, {}),
                )
            )
        if not new:
            return
        futures = self.target_admin.create_topics(new, operation_timeout=_TIMEOUT_S, request_timeout=_TIMEOUT_S)
        for remote, fut in futures.items():
            try:
                fut.result()
            except Exception as exc:  # noqa: BLE001 - inspected below
                if _code(exc) == "TOPIC_ALREADY_EXISTS":
                    continue
                raise TopicSyncError(f"flow={self.flow.name} cannot create remote topic {remote}: {exc}") from None
            log.info("flow=%s created remote topic %s", self.flow.name, remote)
            report.created.append(remote)

    def _grow(self, topics: dict[str, int], target_md: dict[str, TopicMetadata], report: SyncReport) -> None:
        from confluent_kafka.admin import NewPartitions

        grow = []
        for topic, partitions in topics.items():
            remote = self.remote_name(topic)
            tmd = target_md.get(remote)
            if tmd is None:
                continue
            have = len(tmd.partitions)
            if have < partitions:
                grow.append(NewPartitions(remote, partitions))
                report.grown[remote] = (have, partitions)
            elif have > partitions:
                log.debug(
                    "flow=%s remote topic %s has %d partitions, source %s has %d",
                    self.flow.name,
                    remote,
                    have,
                    topic,
                    partitions,
                )
        if not grow:
            return
        futures = self.target_admin.create_partitions(grow, operation_timeout=_TIMEOUT_S, request_timeout=_TIMEOUT_S)
        for remote, fut in futures.items():
            try:
                fut.result()
            except Exception as exc:  # noqa: BLE001
                if _code(exc) == "INVALID_PARTITIONS":  # someone else grew it meanwhile
                    continue
                raise TopicSyncError(
                    f"flow={self.flow.name} cannot add partitions to remote topic {remote}: {exc}"
                ) from None
            before, after = report.grown[remote]
            log.info(
                "flow=%s remote topic %s grown from %d to %d partitions",
                self.flow.name,
                remote,
                before,
                after,
            )

    def _source_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        """Non-default, replicable configs of the source topics."""
        from confluent_kafka.admin import ConfigResource, ConfigSource

        resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
        if not resources:
            return {}
        out: dict[str, dict[str, str]] = {}
        keep = self.flow.config_property_filter
        for res, fut in self.source_admin.describe_configs(resources, request_timeout=_TIMEOUT_S).items():
            try:
                entries = fut.result()
            except Exception as exc:  # noqa: BLE001 - a topic deleted meanwhile; skip it
                log.warning("flow=%s cannot read configs of source topic %s: %s", self.flow.name, res.name, exc)
                continue
            out[res.name] = {
                name: entry.value
                for name, entry in entries.items()
                if entry.value is not None
                and not entry.is_sensitive
                and entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
                and keep.should_replicate(name)
            }
        return out

    def _alter_configs(self, topics: list[str], source_configs: dict[str, dict[str, str]], report: SyncReport) -> None:
        from confluent_kafka.admin import (
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
            ConfigSource,
        )

        if not topics:
            return
        remote_of = {self.remote_name(t): t for t in topics}
        resources = [ConfigResource(ConfigResource.Type.TOPIC, r) for r in remote_of]
        current: dict[str, dict[str, str]] = {}
        for res, fut in self.target_admin.describe_configs(resources, request_timeout=_TIMEOUT_S).items():
            try:
                current[res.name] = {
                    n: e.value for n, e in fut.result().items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
                }
            except Exception:  # noqa: BLE001
                continue
        changes = []
        for remote, topic in remote_of.items():
            wanted = source_configs.get(topic)
            if wanted is None or remote not in current:
                continue
            ops = [
                ConfigEntry(n, v, incremental_operation=AlterConfigOpType.SET)
                for n, v in wanted.items()
                if current[remote].get(n) != v
            ]
            if ops:
                changes.append(ConfigResource(ConfigResource.Type.TOPIC, remote, incremental_configs=ops))
        if not changes:
            return
        for res, fut in self.target_admin.incremental_alter_configs(changes).items():
            try:
                fut.result()
            except Exception as exc:  # noqa: BLE001 - configs are best effort, data is not
                log.warning("flow=%s cannot update configs of remote topic %s: %s", self.flow.name, res.name, exc)
                continue
            log.info("flow=%s updated configs of remote topic %s", self.flow.name, res.name)
            report.configs_updated.append(res.name)

    def max_message_bytes(self, topics: Iterable[str]) -> dict[str, int]:
        """``max.message.bytes`` of the remote topics of ``topics`` on the target.

        A topic this flow has just created may be unknown to the broker that answers for a moment
        (its metadata is still spreading): asked again for up to about 10 s before a warning.
        """
        import time

        from confluent_kafka.admin import ConfigResource

        names = [self.remote_name(t) for t in topics]
        out: dict[str, int] = {}
        for attempt in range(6):
            if not names:
                break
            resources = [ConfigResource(ConfigResource.Type.TOPIC, n) for n in names]
            unknown: list[str] = []
            for res, fut in self.target_admin.describe_configs(resources, request_timeout=_TIMEOUT_S).items():
                try:
                    entry = fut.result().get("max.message.bytes")
                except Exception as exc:  # noqa: BLE001 - the broker then judges alone
                    if _code(exc) == "UNKNOWN_TOPIC_OR_PART" and attempt < 5:
                        unknown.append(res.name)
                        continue
                    log.warning("flow=%s cannot read max.message.bytes of %s: %s", self.flow.name, res.name, exc)
                    continue
                if entry is not None and entry.value is not None:
                    out[res.name] = int(entry.value)
            names = unknown
            if names:
                time.sleep(0.5 * (attempt + 1))
        return out


def _code(exc: BaseException) -> str:
    err = exc.args[0] if exc.args else None
    name = getattr(err, "name", None)
    return str(name()) if callable(name) else ""
