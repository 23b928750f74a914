"""MM2's rule for topic ACLs: which source ACLs a flow copies to the target, and as what.

MirrorSourceConnector copies topic ACLs of replicated topics to their remote names; this module
holds that rule and nothing else (no Kafka client). MM2's rules, kept:

- only ACLs of topics the flow replicates (its filter, not internal, not a cycle);
- ``ALLOW WRITE`` is never copied: only the mirror writes to a remote topic;
- ``ALLOW ALL`` becomes ``ALLOW READ`` on the remote topic;
- anything else (DENY included) is copied as it is, for the same principal and host;
- ACLs are only ever added on the target, never deleted (the sync is one-way and additive).

Beyond MM2, which copies literal ACLs only: a ``PREFIXED`` ACL is copied as a prefixed ACL on the
remote prefix when the prefix itself would be replicated (with the default policy ``orders``
becomes ``A.orders``, which covers exactly the remote names of the topics it covered). The
wildcard topic ``*`` is never copied (its remote name would be a literal topic ``A.*``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["TopicAcl", "target_acl"]


@dataclass(frozen=True, order=True)
class TopicAcl:
    """One topic ACL binding, in Kafka's names (``LITERAL``/``PREFIXED``, ``READ``, ``ALLOW``)."""

    topic: str
    pattern: str
    principal: str
    host: str
    operation: str
    permission: str

    def __str__(self) -> str:
        return f"{self.permission} {self.principal}@{self.host} {self.operation} on topic {self.pattern}:{self.topic}"


def target_acl(acl: TopicAcl, remote_name: Callable[[str], str], replicates: Callable[[str], bool]) -> TopicAcl | None:
    """The ACL to create on the target for source ``acl``, or None when MM2's rule copies none.

    ``remote_name`` is the flow's policy (``topic -> A.topic``), ``replicates`` its topic rule.
    """
    if acl.pattern not in ("LITERAL", "PREFIXED") or acl.topic in ("*", ""):
        return None
    if acl.permission == "ALLOW" and acl.operation == "WRITE":
        return None
    if not replicates(acl.topic):
        return None
    operation = "READ" if acl.permission == "ALLOW" and acl.operation == "ALL" else acl.operation
    return TopicAcl(remote_name(acl.topic), acl.pattern, acl.principal, acl.host, operation, acl.permission)
