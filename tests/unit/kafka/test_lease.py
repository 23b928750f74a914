"""The lease's host-local lock: a live holder on this host is refused at once, a released one is not."""

from __future__ import annotations

import os

import pytest

from sparkmirror.kafka.lease import FlowLease, LeaseHeld


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
