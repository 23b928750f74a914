"""Failover rules (sparkmirror.core.failover): routes, no rewind, empty groups only, caught up or forced."""

from __future__ import annotations

import pytest

from sparkmirror.core.failover import (
    Action,
    Direction,
    FailoverPlan,
    FailoverRefused,
    GroupState,
    PartitionMove,
    RefusalKind,
    decide_commit,
    missing_after,
    route,
)
from sparkmirror.core.policy import DefaultReplicationPolicy, IdentityReplicationPolicy

POLICY = DefaultReplicationPolicy()


def test_route_forward_names_the_remote_topic() -> None:
    r = route("orders", "A", "B", forward_policy=POLICY, forward_topics={"orders"}, reverse_policy=None)
    assert r is not None
    assert (r.direction, r.flow, r.map_topic, r.destination_topic) == (Direction.FORWARD, "A->B", "orders", "A.orders")


def test_route_reverse_maps_a_remote_copy_back_to_its_original() -> None:
    r = route(
        "A.orders",
        "B",
        "A",
        forward_policy=POLICY,
        forward_topics={"orders"},
        reverse_policy=POLICY,
        reverse_topics={"orders"},
    )
    assert r is not None
    assert (r.direction, r.flow, r.map_topic, r.destination_topic) == (Direction.REVERSE, "A->B", "orders", "orders")


def test_route_forward_for_topics_produced_on_the_origin_during_failover() -> None:
    # failback B->A: `orders` was produced on B while A was down and B->A mirrors it.
    r = route(
        "orders",
        "B",
        "A",
        forward_policy=POLICY,
        forward_topics={"orders"},
        reverse_policy=POLICY,
        reverse_topics={"orders"},
    )
    assert r is not None and r.direction is Direction.FORWARD and r.destination_topic == "B.orders"


def test_route_none_when_no_flow_carries_the_topic() -> None:
    assert route("other", "A", "B", forward_policy=POLICY, forward_topics={"orders"}, reverse_policy=None) is None
    # A remote copy from a third cluster does not map back to the destination.
    assert route("C.orders", "B", "A", forward_policy=None, reverse_policy=POLICY, reverse_topics={"orders"}) is None


def test_route_identity_policy_prefers_forward() -> None:
    ident = IdentityReplicationPolicy()
    r = route(
        "orders",
        "A",
        "B",
        forward_policy=ident,
        forward_topics={"orders"},
        reverse_policy=ident,
        reverse_topics={"orders"},
    )
    assert r is not None and r.direction is Direction.FORWARD and r.destination_topic == "orders"
    r = route("orders", "B", "A", forward_policy=None, reverse_policy=ident, reverse_topics={"orders"})
    assert r is not None and r.direction is Direction.REVERSE


def test_never_backwards_unless_forced() -> None:
    action, reason = decide_commit(500, 400, force=False)
    assert action is Action.KEEP_AHEAD and "preventing rewind" in reason
    action, reason = decide_commit(500, 400, force=True)
    assert action is Action.REWIND and "--force" in reason


def test_commit_forward_and_when_absent() -> None:
    assert decide_commit(None, 10, force=False)[0] is Action.COMMIT
    assert decide_commit(5, 10, force=False)[0] is Action.COMMIT


def test_idempotent_second_run_commits_nothing() -> None:
    assert decide_commit(10, 10, force=False)[0] is Action.UNCHANGED
    plan = _plan([_move("g", existing=10, target=10)])
    assert plan.commits() == {}


def test_no_history_no_commit() -> None:
    assert decide_commit(None, None, force=True)[0] is Action.NO_HISTORY
    plan = _plan([_move("g", existing=None, target=None)])
    assert plan.commits() == {}


def _move(group: str, *, existing: int | None, target: int | None, partition: int = 0) -> PartitionMove:
    action, reason = decide_commit(existing, target, force=False)
    return PartitionMove(
        group,
        "orders",
        partition,
        100,
        "A.orders",
        target,
        "forward (A->B offset map)",
        "EXACT",
        0,
        existing,
        action,
        reason,
        "",
    )


def _plan(moves: list[PartitionMove], **kw: object) -> FailoverPlan:
    plan = FailoverPlan("failover", "A", "B", True, "origin", False, **kw)  # type: ignore[arg-type]
    plan.moves = moves
    plan.groups = sorted({m.group for m in moves})
    return plan


def test_empty_groups_only_names_the_active_members() -> None:
    plan = _plan([_move("g1", existing=None, target=5)])
    plan.destination_groups = {"g1": GroupState("g1", "stable", (("m-1", "client-7", "/127.0.0.1"),))}
    [refusal] = plan.refusals()
    assert refusal.kind is RefusalKind.ACTIVE_GROUPS and refusal.exit_code == 3
    assert "g1" in refusal.message and "m-1" in refusal.message and "client-7" in refusal.message
    with pytest.raises(FailoverRefused) as info:
        plan.check()
    assert info.value.exit_code == 3


def test_caught_up_or_forced() -> None:
    plan = _plan([_move("g1", existing=None, target=5)])
    plan.lag = {"orders[0]": 0, "orders[1]": 42, "orders[2]": 7}
    [refusal] = plan.refusals()
    assert refusal.kind is RefusalKind.NOT_CAUGHT_UP and refusal.exit_code == 4
    assert "49 records" in refusal.message and "orders[1]: 42" in refusal.message and "orders[0]" not in refusal.message
    plan.force = True
    assert plan.refusals() == []
    assert plan.commits() == {"g1": {("A.orders", 0): 5}}


def test_force_does_not_override_active_groups() -> None:
    plan = _plan([_move("g1", existing=None, target=5)])
    plan.force = True
    plan.destination_groups = {"g1": GroupState("g1", "stable", (("m", "c", "h"),))}
    assert [r.kind for r in plan.refusals()] == [RefusalKind.ACTIVE_GROUPS]


def test_refused_error_survives_pickling() -> None:
    import pickle

    err = pickle.loads(pickle.dumps(FailoverRefused("no", 4)))
    assert (str(err), err.exit_code) == ("no", 4)


def test_missing_after_counts_from_the_mirrored_end() -> None:
    assert missing_after(90, 0, 100) == (90, 100)
    assert missing_after(None, 10, 100) == (10, 100)  # nothing mirrored: all retained records
    assert missing_after(100, 0, 100) == (100, 100)
    assert missing_after(5, 20, 100) == (20, 100)  # expired below the log start: not countable


def test_report_json_has_every_fact() -> None:
    plan = _plan([_move("g", existing=None, target=3)])
    d = plan.as_dict()
    assert d["moves"][0]["action"] == "commit" and d["summary"]["commit"] == 1 and d["refusals"] == []


def test_report_text_has_table_summary_and_reset_reminder() -> None:
    from sparkmirror.failover.report import render

    plan = _plan([_move("g", existing=None, target=3), _move("g", existing=9, target=3, partition=1)])
    plan.lag = {"orders[0]": 0, "orders[1]": 0}
    text = render(plan)
    assert "group g" in text and "orders[0]" in text and "A.orders" in text
    assert "summary: 1 groups, 2 partitions: 1 to commit, 0 unchanged, 1 kept" in text
    assert "records not on B: 0" in text
    assert "auto.offset.reset" in text and "run again with --execute" in text
    plan.origin_reachable = False
    assert "records not on B: unknown" in render(plan)
