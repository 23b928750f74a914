"""Topic ACL sync for one flow: source topic ACLs copied to the remote topics on the target.

MM2's ``sync.topic.acls.enabled`` / ``sync.topic.acls.interval.seconds``; the rule of what is
copied lives in :mod:`sparkmirror.core.acls`. What it must never do: delete or change an ACL on
the target (it only creates missing ones), or stop the flow: as in MM2, a source without an
authorizer, or a principal without the right to read or create ACLs, is logged (once) and the
sync skipped, while the data keeps flowing.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sparkmirror.core.acls import TopicAcl, target_acl
from sparkmirror.kafka.flowclients import FlowClients

if TYPE_CHECKING:
    from confluent_kafka.admin import AclBinding

log = logging.getLogger(__name__)

_TIMEOUT_S = 30.0


def _name(value: object) -> str:
    return str(getattr(value, "name", value))


class AclSync:
    """Copies topic ACLs from the flow's source to its target (additive, MM2's rule)."""

    def __init__(self, clients: FlowClients) -> None:
        self.clients = clients
        self.flow = clients.flow
        self._warned: set[str] = set()

    def source_acls(self) -> list[TopicAcl] | None:
        """Every topic ACL on the source; None when the source cannot say (no authorizer, no right)."""
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import (
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        # None: any name, principal, host (librdkafka's filter; its type hints say str).
        anything: str = None  # type: ignore[assignment]
        query = AclBindingFilter(
            ResourceType.TOPIC, anything, ResourcePatternType.ANY, anything, anything, AclOperation.ANY,
            AclPermissionType.ANY,
        )  # fmt: skip
        try:
            bindings: list[AclBinding] = self.clients.source_admin.describe_acls(
                query, request_timeout=_TIMEOUT_S
            ).result()
        except KafkaException as exc:
            code = exc.args[0].code() if exc.args and hasattr(exc.args[0], "code") else None
            if code == KafkaError.SECURITY_DISABLED:
                if "describe" not in self._warned:  # as MM2: said once, at info (the cluster has no ACLs)
                    self._warned.add("describe")
                    log.info("flow=%s cluster %s has no ACL authorizer; no topic ACLs to sync", self.flow.name,
                             self.flow.source)  # fmt: skip
                return None
            self._warn_once("describe", f"cannot list the topic ACLs of cluster {self.flow.source}: {_reason(exc)}")
            return None
        return [
            TopicAcl(
                b.name,
                _name(b.resource_pattern_type),
                b.principal,
                b.host,
                _name(b.operation),
                _name(b.permission_type),
            )
            for b in bindings
        ]

    def sync(self) -> int:
        """Create on the target the ACLs the source's topic ACLs call for; the number created."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AclBinding, ResourceType

        acls = self.source_acls()
        if acls is None:
            return 0
        flow = self.flow
        wanted = sorted(
            {
                t
                for a in acls
                if (
                    t := target_acl(
                        a, lambda topic: flow.policy.format_remote_topic(flow.source, topic), flow.replicates
                    )
                )
                is not None
            }
        )
        if not wanted:
            return 0
        bindings = [
            AclBinding(ResourceType.TOPIC, t.topic, t.pattern, t.principal, t.host, t.operation, t.permission)
            for t in wanted
        ]
        created = 0
        # create_acls adds what is missing and leaves an existing binding as it is (idempotent).
        for binding, future in self.clients.target_admin.create_acls(bindings, request_timeout=_TIMEOUT_S).items():
            try:
                future.result()
                created += 1
            except KafkaException as exc:
                self._warn_once(
                    f"create {binding.name}",
                    f"cannot create ACL on topic {binding.name} of cluster {flow.target}: {_reason(exc)}",
                )
        log.info("flow=%s topic ACLs synced: %d binding(s) on %s", flow.name, created, flow.target)
        return created

    def _warn_once(self, what: str, message: str) -> None:
        if what not in self._warned:
            self._warned.add(what)
            log.warning("flow=%s %s; topic ACL sync skipped (sync.topic.acls.enabled)", self.flow.name, message)


def _reason(exc: Exception) -> str:
    err = exc.args[0] if exc.args else exc
    name = getattr(err, "name", None)
    text = err.str() if hasattr(err, "str") else str(err)
    return f"{name()}: {text}" if callable(name) else text
