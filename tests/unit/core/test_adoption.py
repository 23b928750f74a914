"""A flow's first start: its own state, MirrorMaker 2's, or nothing, never a silent copy over records."""

from __future__ import annotations

from sparkmirror.core.adoption import PartitionState, conflict_message, own_next, plan_first_start


def _state(
    *,
    own: int | None = None,
    written: int | None = None,
    handed_back: bool = False,
    mm2: int | None = None,
    start: int = 0,
    end: int = 100,
    records: int = 0,
    remote_end: int | None = None,
) -> PartitionState:
    return PartitionState(
        own_next=own,
        own_written_end=written,
        handed_back=handed_back,
        mm2_next=mm2,
        source_start=start,
        source_end=end,
        remote_records=records,
        remote_end=records if remote_end is None else remote_end,
    )


def test_mm2s_position_is_adopted_where_sparkmirror_has_none() -> None:
    plan = plan_first_start({("t", 0): _state(mm2=400, end=600, records=400), ("t", 1): _state(start=7)})
    assert plan.adopted == {("t", 0): 400}
    assert plan.claimed == {("t", 1): 7}  # nothing on the target: from the log start, claimed before copying
    assert not plan.conflicts


def test_sparkmirrors_own_state_wins_over_an_older_mm2_position() -> None:
    states = {("t", 0): _state(own=900, written=900, mm2=400, records=900)}
    plan = plan_first_start(states)
    assert plan.starts == {} and not plan.conflicts


def test_mm2_that_ran_after_a_hand_back_is_adopted_again() -> None:
    # Handed back at 900 (B's end 900); MM2 copied to 1200 since: B's end moved to 1200.
    states = {("t", 0): _state(own=900, written=900, handed_back=True, mm2=1200, records=1200, end=1500)}
    assert plan_first_start(states).adopted == {("t", 0): 1200}
    # Not handed back: an MM2 position past sparkmirror's (progress rewound, a topic reset) is never taken.
    rewound = {("t", 0): _state(own=900, written=900, mm2=1200, records=1200, end=1500)}
    assert plan_first_start(rewound).starts == {}
    # Handed back, but B did not grow by what MM2 would have copied (a re-created remote topic): never.
    recreated = {("t", 0): _state(own=900, written=900, handed_back=True, mm2=1200, records=10, end=1500)}
    assert plan_first_start(recreated).starts == {}


def test_an_mm2_position_that_cannot_be_about_this_target_is_left_aside() -> None:
    states = {
        ("t", 0): _state(mm2=400, records=0, remote_end=0),  # nothing was ever written there
        ("t", 1): _state(mm2=400, end=100, records=400),  # past the source's end: the source re-created
    }
    plan = plan_first_start(states)
    assert plan.adopted == {} and plan.claimed == {("t", 0): 0} and plan.conflicts == {("t", 1): (400, 400)}
    assert set(plan.unusable) == {("t", 0), ("t", 1)}
    assert "never held a record" in plan.unusable[("t", 0)] and "past the source's end 100" in plan.unusable[("t", 1)]


def test_a_target_other_writers_share_is_never_refused() -> None:
    # IdentityReplicationPolicy (aggregation): another flow's or local producers' records are expected there.
    plan = plan_first_start({("t", 0): _state(start=3, records=50)}, shared_target=True)
    assert plan.claimed == {("t", 0): 3} and not plan.conflicts


def test_records_nothing_explains_are_refused_unless_the_operator_chose() -> None:
    states = {("t", 0): _state(start=5, end=300, records=250, remote_end=250)}
    refused = plan_first_start(states)
    assert refused.conflicts == {("t", 0): (250, 250)} and refused.starts == {}
    assert plan_first_start(states, existing="start-at-end").claimed == {("t", 0): 300}
    assert plan_first_start(states, existing="copy-again").claimed == {("t", 0): 5}
    # Adoption turned off: MM2's position is not read, the records are then unexplained.
    off = plan_first_start({("t", 0): _state(mm2=250, end=300, records=250)}, adopt=False)
    assert off.conflicts == {("t", 0): (250, 250)}


def test_the_refusal_names_the_topic_its_ends_and_the_ways_on() -> None:
    plan = plan_first_start({("orders", 0): _state(records=3000), ("orders", 1): _state(records=20)})
    text = conflict_message("A->B", "B", plan, {"orders": "A.orders"}, "mm2-offsets.A.internal")
    assert "A.orders [0] end 3000 (3,000 records), [1] end 20 (20 records) on B" in text
    for way in ("--mm2-offsets-topic", "--existing-records start-at-end", "--existing-records copy-again"):
        assert way in text


def test_own_next_is_the_later_of_the_progress_and_the_offset_maps_end() -> None:
    """At least once the map may be ahead of the progress; exactly once they agree until an idle partition's
    progress expires, when the map's end alone says where it stands (not the log start)."""
    tail = (10, 20, 5)  # upstream 10..14 written at 20..24: mirrored up to 15
    assert own_next(None, None) is None
    assert own_next(7, None) == 7
    assert own_next(None, tail) == 15  # the progress expired, or was never committed
    assert own_next(12, tail) == 15  # at least once: segments before the progress
    assert own_next(15, tail) == 15
    assert own_next(30, tail) == 30  # adopted from MM2 after a hand-back
    assert own_next(0, None) == 0  # --reset-topic: the progress set to 0, the old segments forgotten
