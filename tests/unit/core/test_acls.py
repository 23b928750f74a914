"""MM2's topic ACL rule: what a flow copies, and as what."""

from __future__ import annotations

import pytest

from sparkmirror.core.acls import TopicAcl, target_acl


def _remote(topic: str) -> str:
    return f"A.{topic}"


def _replicates(topic: str) -> bool:
    return not topic.startswith("private")


def _acl(op: str, perm: str = "ALLOW", pattern: str = "LITERAL", topic: str = "orders") -> TopicAcl:
    return TopicAcl(topic, pattern, "User:app", "*", op, perm)


@pytest.mark.parametrize("op", ["READ", "DESCRIBE", "DESCRIBE_CONFIGS", "DELETE", "ALTER"])
def test_allow_acls_are_copied_to_the_remote_name(op: str) -> None:
    assert target_acl(_acl(op), _remote, _replicates) == TopicAcl("A.orders", "LITERAL", "User:app", "*", op, "ALLOW")


def test_allow_write_is_never_copied() -> None:
    assert target_acl(_acl("WRITE"), _remote, _replicates) is None


def test_deny_write_is_copied() -> None:
    assert target_acl(_acl("WRITE", "DENY"), _remote, _replicates) == _acl("WRITE", "DENY", topic="A.orders")


def test_allow_all_becomes_allow_read() -> None:
    assert target_acl(_acl("ALL"), _remote, _replicates) == _acl("READ", topic="A.orders")


def test_prefixed_acl_is_copied_as_a_prefixed_acl_on_the_remote_prefix() -> None:
    assert target_acl(_acl("READ", pattern="PREFIXED", topic="ord"), _remote, _replicates) == _acl(
        "READ", pattern="PREFIXED", topic="A.ord"
    )


def test_acls_of_topics_the_flow_does_not_replicate_and_the_wildcard_are_not_copied() -> None:
    assert target_acl(_acl("READ", topic="private-x"), _remote, _replicates) is None
    assert target_acl(_acl("READ", topic="*"), _remote, _replicates) is None
    assert target_acl(_acl("READ", pattern="MATCH"), _remote, _replicates) is None
