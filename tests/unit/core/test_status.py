"""The status record and the health rules of `sparkmirror status`, without a cluster."""

from __future__ import annotations

import pytest

from sparkmirror.core.exceptions import FormatError
from sparkmirror.core.status import (
    FlowStatus,
    PartitionLag,
    StatusExit,
    flow_state,
    health,
    latest_statuses,
)

NOW = 1_800_000_000_000


def _status(state: str = "running", updated_ago_ms: int = 1_000, error: str | None = None) -> FlowStatus:
    return FlowStatus(
        flow="A->B",
        state=state,  # type: ignore[arg-type]
        host="h1",
        pid=42,
        started_ms=NOW - 60_000,
        updated_ms=NOW - updated_ago_ms,
        interval_ms=10_000,
        records=7,
        error=error,
    )


def test_a_status_record_round_trips_and_is_keyed_by_its_flow() -> None:
    s = _status(error="boom")
    assert FlowStatus.decode(s.key_bytes(), s.value_bytes()) == s
    assert s.key_bytes() == b"A->B"


@pytest.mark.parametrize(
    ("value", "what"),
    [
        (b"\xff", "not UTF-8 JSON"),
        (b"[]", "not a JSON object"),
        (b'{"version": 9}', "unknown version"),
        (b'{"version": 0, "flow": "A->B"}', "missing or bad field"),
    ],
)
def test_a_bad_status_record_is_refused_naming_what_is_wrong(value: bytes, what: str) -> None:
    with pytest.raises(FormatError, match=what):
        FlowStatus.decode(b"A->B", value)


def test_a_record_naming_another_flow_than_its_key_is_refused() -> None:
    with pytest.raises(FormatError, match="names another flow"):
        FlowStatus.decode(b"C->B", _status().value_bytes())


def test_the_last_record_of_a_flow_wins_and_a_tombstone_forgets_it() -> None:
    old, new = _status("starting"), _status("stopped")
    got = latest_statuses([(b"A->B", old.value_bytes()), (b"A->B", new.value_bytes())])
    assert got == {"A->B": new}
    assert latest_statuses([(b"A->B", new.value_bytes()), (b"A->B", None)]) == {}


def test_a_running_flow_that_stopped_reporting_is_silent() -> None:
    state, detail = flow_state(_status("running", updated_ago_ms=3 * 10_000 + 16_000), NOW)
    assert state == "silent" and "h1 pid 42" in detail
    assert flow_state(_status("running", updated_ago_ms=20_000), NOW)[0] == "running"


def test_a_stopped_flow_is_never_silent_and_a_failed_one_says_why() -> None:
    assert flow_state(_status("stopped", updated_ago_ms=10**9), NOW)[0] == "stopped"
    state, detail = flow_state(_status("failed", error="flow=A->B t[0] offset=7: refused"), NOW)
    assert state == "failed" and "t[0] offset=7" in detail
    assert flow_state(None, NOW)[0] == "unknown"


def test_lag_counts_from_the_log_start_when_records_expired_unmirrored() -> None:
    p = PartitionLag(
        "t", 0, source_start_offset=50, source_end_offset=80, mirrored_offset=10, oldest_unmirrored_ms=NOW - 4_000
    )
    assert p.lag_records == 30
    assert p.lag_seconds(NOW) == 4.0
    caught_up = PartitionLag("t", 1, 0, 80, 80, oldest_unmirrored_ms=NOW - 4_000)
    assert caught_up.lag_records == 0 and caught_up.lag_seconds(NOW) == 0.0


def test_health_down_beats_lagging_beats_healthy() -> None:
    lagging = {"A->B": [PartitionLag("t", 0, 0, 100, 10, NOW - 60_000)]}
    assert health({"A->B": "running"}, lagging, NOW, max_lag_records=None, max_lag_seconds=None) == StatusExit.HEALTHY
    assert health({"A->B": "running"}, lagging, NOW, max_lag_records=89, max_lag_seconds=None) == StatusExit.LAGGING
    assert health({"A->B": "running"}, lagging, NOW, max_lag_records=90, max_lag_seconds=None) == StatusExit.HEALTHY
    assert health({"A->B": "stopped"}, lagging, NOW, max_lag_records=None, max_lag_seconds=59) == StatusExit.LAGGING
    assert health({"A->B": "silent"}, lagging, NOW, max_lag_records=0, max_lag_seconds=None) == StatusExit.DOWN
    assert health({"A->B": "failed"}, {}, NOW, max_lag_records=None, max_lag_seconds=None) == StatusExit.DOWN
