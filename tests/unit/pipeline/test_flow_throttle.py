"""The driver's side of flow control: a flow's limit shared among its tasks, a target's among its
flows, and what each task's answer says."""

from __future__ import annotations

import pytest

from sparkmirror.core.control import FlowControl
from sparkmirror.pipeline.driver.control import FlowThrottle, TargetShares
from sparkmirror.pipeline.reports import Report


def _report(task: int, copied: int, held: float, window: float = 1.0) -> Report:
    return Report(task, 0, copied_bytes=copied, window_s=window, held_s=held)


def test_no_limit_no_rate_and_the_configured_limit_is_shared_evenly_at_first() -> None:
    t = FlowThrottle("A->B", "B", configured=None)
    assert t.first(2).rate is None
    t = FlowThrottle("A->B", "B", configured=1000)
    assert t.first(4).rate == 250


def test_a_task_with_little_to_copy_leaves_its_part_to_the_busy_ones() -> None:
    t = FlowThrottle("A->B", "B", configured=1000)
    t.first(2)
    t.answer(_report(0, 100, held=0.0), stop=False)  # copied 100 bytes/s, never waited
    answer = t.answer(_report(1, 500, held=0.9), stop=False)  # held back most of its window
    assert answer.rate == pytest.approx(1000 - 125)
    assert t.answer(_report(0, 100, held=0.0), stop=False).rate == pytest.approx(125)
    assert t.held_s == pytest.approx(0.45)  # averaged over the two tasks


def test_the_operators_record_replaces_the_configured_limit_and_names_paused_topics() -> None:
    t = FlowThrottle("A->B", "B", configured=1000)
    t.first(1)
    control = FlowControl("A->B").throttle(0, at_ms=1, by="u").pause("or.*", at_ms=1, by="u")
    t.follow(control, ["orders", "payments"])
    answer = t.answer(_report(0, 0, 0.0), stop=True)
    assert answer.stop and answer.rate is None and answer.paused == ("orders",)
    t.follow(FlowControl("A->B", paused=True), ["orders", "payments"])
    assert t.answer(_report(0, 0, 0.0), stop=False).paused == ("orders", "payments")


def test_a_targets_limit_is_shared_among_the_flows_into_it() -> None:
    shares = TargetShares({"B": 1000, "C": None})
    ab = FlowThrottle("A->B", "B", configured=None, targets=shares)
    cb = FlowThrottle("C->B", "B", configured=300, targets=shares)
    ab.first(1)
    cb.first(1)
    ab.answer(_report(0, 700, held=0.9), stop=False)
    cb.answer(_report(0, 300, held=0.9), stop=False)
    # C->B wants at most its own 300; A->B gets the rest of B's 1000
    assert cb.limit() == pytest.approx(300)
    assert ab.limit() == pytest.approx(700)
    cb.close()
    assert ab.limit() == pytest.approx(1000)
    assert FlowThrottle("D->C", "C", configured=None, targets=shares).limit() is None


def test_a_change_is_in_effect_once_every_task_follows_it() -> None:
    t = FlowThrottle("A->B", "B", configured=None)
    start = t.first(2)
    paused = FlowControl("A->B", paused=True)
    t.follow(paused, ["orders"])
    assert t.in_effect == (FlowControl("A->B"), ())  # asked, not yet followed
    answer = t.answer(Report(0, 0, control_version=start.version), stop=False)
    assert answer.paused == ("orders",) and answer.version > start.version
    t.answer(Report(0, 0, control_version=answer.version), stop=False)
    assert t.in_effect == (FlowControl("A->B"), ())  # task 1 still copies
    t.answer(Report(1, 0, control_version=answer.version), stop=False)
    assert t.in_effect == (paused, ("orders",))
    t.follow(FlowControl("A->B"), ["orders"])
    t.stopped()  # no task runs: nothing copies, the record is in effect as it is
    assert t.in_effect == (FlowControl("A->B"), ())


def test_grants_never_add_up_to_more_than_the_limit_while_the_shares_move() -> None:
    t = FlowThrottle("A->B", "B", configured=1000)
    t.first(2)
    granted = {0: 500.0, 1: 500.0}
    pattern = [(0, 100, 0.0), (1, 900, 0.9), (0, 900, 0.9), (1, 100, 0.0), (0, 50, 0.0), (1, 990, 0.9)]
    for task, copied, held in pattern * 3:
        granted[task] = t.answer(_report(task, copied, held), stop=False).rate or 0.0
        assert sum(granted.values()) <= 1000 + 1e-6, granted


def test_a_task_that_ended_leaves_its_share_and_no_longer_holds_back_a_change() -> None:
    t = FlowThrottle("A->B", "B", configured=1000)
    start = t.first(2)
    t.answer(Report(0, 0, final=True, control_version=start.version), stop=False)  # --once: its range is done
    t.follow(FlowControl("A->B", paused=True), ["orders"])
    answer = t.answer(Report(1, 0, copied_bytes=900, window_s=1.0, held_s=0.9, control_version=t.version), stop=False)
    assert answer.rate == pytest.approx(1000)
    assert t.in_effect[0].paused


def test_a_new_job_on_a_shared_target_asks_for_its_share_before_its_first_report() -> None:
    shares = TargetShares({"B": 1000})
    busy = FlowThrottle("A->B", "B", configured=None, targets=shares)
    busy.first(1)
    busy.answer(_report(0, 1000, held=0.9), stop=False)
    fresh = FlowThrottle("C->B", "B", configured=None, targets=shares)
    assert fresh.first(1).rate == pytest.approx(500)  # not 0: it has not shown what it needs yet
