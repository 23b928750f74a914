"""The lease's host-local lock: a live holder on this host is refused at once, a released one is not."""

from __future__ import annotations

import os

import pytest

from sparkmirror.kafka.lease import FlowLease, LeaseHeld, LeaseRefused, refusal


def _lease(bootstrap: str = "127.0.0.1:1") -> FlowLease:
    return FlowLease({"bootstrap.servers": bootstrap}, flow="A->B", group="__sparkmirror.lease.A-B", topic="t")


def test_a_live_holder_on_this_host_is_refused_at_once_naming_its_pid() -> None:
    first, second = _lease(), _lease()
    first._lock_host()
    try:
        with pytest.raises(LeaseHeld, match=rf"host=\S+ pid={os.getpid()} holds its lease") as err:
            second._lock_host()
        assert err.value.exit_code == 6
    finally:
        first.release()
    second._lock_host()  # released: free at once
    second.release()


def test_the_lock_is_per_target_cluster() -> None:
    first, other = _lease("127.0.0.1:1"), _lease("127.0.0.1:2")
    first._lock_host()
    try:
        other._lock_host()
        other.release()
    finally:
        first.release()


def test_a_refused_group_or_topic_is_an_access_failure_not_a_holder() -> None:
    from confluent_kafka import KafkaError

    group = KafkaError(
        KafkaError.GROUP_AUTHORIZATION_FAILED, "FindCoordinator response error: Group authorization failed"
    )
    assert refusal(group) == ("authorization", f"GROUP_AUTHORIZATION_FAILED: {group.str()}")
    topic = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "Subscribed topic not authorized")
    assert refusal(topic) is not None and refusal(topic)[0] == "authorization"  # type: ignore[index]
    creds = KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: Authentication failed")
    assert refusal(creds) is not None and refusal(creds)[0] == "authentication"  # type: ignore[index]
    # A target that is down or a coordinator moving is waited for, as before.
    assert refusal(KafkaError(KafkaError._TRANSPORT, "Connection refused")) is None
    assert refusal(KafkaError(KafkaError.COORDINATOR_NOT_AVAILABLE)) is None
    assert refusal(None) is None


def test_lease_refused_keeps_its_kind_and_exit_code_through_pickling() -> None:
    import pickle

    authz = pickle.loads(pickle.dumps(LeaseRefused("authorization", "GROUP_AUTHORIZATION_FAILED: x")))
    assert (authz.kind, authz.detail, authz.exit_code) == ("authorization", "GROUP_AUTHORIZATION_FAILED: x", 1)
    assert LeaseRefused("authentication", "_AUTHENTICATION: y").exit_code == 2
