"""Checkpoint rules and group offset sync rules, one test per rule."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkmirror.core import (
    Checkpoint,
    CheckpointState,
    Method,
    NotLoadedError,
    Translation,
    group_offset_sync_decision,
)

G, T, P = "billing", "A.orders", 0


def _t(upstream: int, downstream: int | None, method: Method = Method.EXACT) -> Translation:
    return Translation(upstream, downstream, method, 0, "test")


def _state(*restored: Checkpoint) -> CheckpointState:
    state = CheckpointState()
    state.restore(restored)
    return state


def _next(state: CheckpointState, upstream: int, downstream: int | None, metadata: str = "") -> Checkpoint | None:
    return state.next_checkpoint(G, T, P, upstream, _t(upstream, downstream), metadata)


def test_checkpoint_first_for_partition_is_emitted() -> None:
    state = _state()
    assert _next(state, 10, 110) == Checkpoint(G, T, P, 10, 110, "")
    assert state.get(G, T, P) == Checkpoint(G, T, P, 10, 110, "")
    assert len(state) == 1


def test_checkpoint_emitted_when_downstream_advances() -> None:
    state = _state()
    _next(state, 10, 110)
    assert _next(state, 12, 112) == Checkpoint(G, T, P, 12, 112)


def test_checkpoint_never_moves_backwards_unless_group_rewound(caplog: pytest.LogCaptureFixture) -> None:
    state = _state()
    _next(state, 10, 110)
    with caplog.at_level(logging.DEBUG, logger="sparkmirror.core.checkpoints"):
        assert _next(state, 11, 105) is None
    assert "Skipping checkpoint" in caplog.text and "preventing downstream rewind" in caplog.text
    assert state.get(G, T, P) == Checkpoint(G, T, P, 10, 110)


def test_checkpoint_follows_group_rewind_even_backwards(caplog: pytest.LogCaptureFixture) -> None:
    state = _state()
    _next(state, 10, 110)
    with caplog.at_level(logging.DEBUG, logger="sparkmirror.core.checkpoints"):
        assert _next(state, 3, 103) == Checkpoint(G, T, P, 3, 103)
    assert "upstream group rewound" in caplog.text


def test_checkpoint_repeated_is_skipped(caplog: pytest.LogCaptureFixture) -> None:
    state = _state()
    _next(state, 10, 110)
    with caplog.at_level(logging.DEBUG, logger="sparkmirror.core.checkpoints"):
        assert _next(state, 10, 110) is None
    assert "repeated checkpoint" in caplog.text


def test_checkpoint_emitted_when_upstream_advances_at_same_downstream() -> None:
    # The group moved through a gap or past what is mirrored: the downstream offset stays,
    # the upstream offset (read by status and failback) must not go stale.
    state = _state()
    _next(state, 10, 110)
    assert _next(state, 14, 110) == Checkpoint(G, T, P, 14, 110)


def test_checkpoint_emitted_when_metadata_changes() -> None:
    state = _state()
    _next(state, 10, 110, "a")
    assert _next(state, 10, 110, "b") == Checkpoint(G, T, P, 10, 110, "b")


def test_checkpoint_not_emitted_without_history() -> None:
    state = _state()
    t = Translation(10, None, Method.NO_HISTORY, 0, "no segments")
    assert state.next_checkpoint(G, T, P, 10, t) is None
    assert state.get(G, T, P) is None


def test_checkpoints_refused_before_restore() -> None:
    state = CheckpointState()
    assert not state.restored
    with pytest.raises(NotLoadedError, match="read back"):
        _next(state, 10, 110)
    state.restore([])
    assert state.restored
    assert _next(state, 10, 110) is not None


def test_restart_restores_last_checkpoint_and_prevents_rewind() -> None:
    # KAFKA-15905: after a restart the emitter must remember where checkpoints were.
    older = Checkpoint(G, T, P, 5, 105)
    newer = Checkpoint(G, T, P, 10, 110)
    other = Checkpoint("other", T, P, 1, 101)
    state = _state(older, newer, other)
    assert state.get(G, T, P) == newer
    assert state.get("other", T, P) == other
    assert _next(state, 11, 108) is None
    assert _next(state, 11, 111) == Checkpoint(G, T, P, 11, 111)


def test_checkpoints_are_per_group_topic_partition() -> None:
    state = _state()
    _next(state, 10, 110)
    assert state.next_checkpoint(G, T, 1, 3, _t(3, 4)) is not None
    assert state.next_checkpoint("g2", T, P, 3, _t(3, 4)) is not None


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50)), max_size=30))
def test_emitted_downstream_only_decreases_with_a_group_rewind(steps: list[tuple[int, int]]) -> None:
    state = _state()
    last: Checkpoint | None = None
    for upstream, downstream in steps:
        cp = _next(state, upstream, downstream)
        if cp is not None and last is not None and cp.downstream_offset < last.downstream_offset:
            assert cp.upstream_offset < last.upstream_offset
        if cp is None and last is not None:
            assert (downstream < last.downstream_offset and upstream >= last.upstream_offset) or (
                (upstream, downstream) == (last.upstream_offset, last.downstream_offset)
            )
        last = cp or last


# -- group offset sync ------------------------------------------------------------------------


def test_sync_skips_active_groups() -> None:
    commit, reason = group_offset_sync_decision(None, 100, group_active=True)
    assert not commit and "active" in reason
    assert group_offset_sync_decision(50, 100, group_active=True)[0] is False


def test_sync_never_rewinds_target_offset() -> None:
    commit, reason = group_offset_sync_decision(120, 100, group_active=False)
    assert not commit and "preventing target rewind" in reason


def test_sync_commits_when_group_has_no_offset() -> None:
    commit, reason = group_offset_sync_decision(None, 100, group_active=False)
    assert commit and "no committed offset" in reason
    assert group_offset_sync_decision(-1, 100, group_active=False)[0] is True  # reset by a non-Java client


def test_sync_advances_target_offset() -> None:
    commit, reason = group_offset_sync_decision(90, 100, group_active=False)
    assert commit and "90 to 100" in reason


def test_sync_skips_equal_offset() -> None:
    commit, reason = group_offset_sync_decision(100, 100, group_active=False)
    assert not commit and "already at 100" in reason


def test_sync_skips_invalid_translation() -> None:
    assert group_offset_sync_decision(None, -1, group_active=False)[0] is False


# -- a pass in slices over the interval ------------------------------------------------------------


def test_a_pass_is_sliced_and_its_slices_spread_evenly_over_the_interval() -> None:
    from sparkmirror.core.checkpoints import CheckpointPass

    groups = [f"g{i}" for i in range(1, 11)]
    plan = CheckpointPass(groups, 60.0, 100.0, slice_size=4)
    assert plan.slices == 3
    seen, due = [], []
    while not plan.done:
        seen.extend(plan.next_slice())
        due.append(plan.next_due())
    assert seen == groups  # every group once, in order
    assert due == [120.0, 140.0, 160.0]  # the last: the next pass, one interval after this one started
    with pytest.raises(IndexError):
        plan.next_slice()


def test_a_small_or_empty_pass_is_one_slice_read_at_once() -> None:
    from sparkmirror.core.checkpoints import CheckpointPass

    for groups in ([], ["a", "b"]):
        plan = CheckpointPass(groups, 5.0, 0.0, slice_size=500)
        assert plan.slices == 1
        assert plan.next_slice() == groups
        assert plan.done and plan.next_due() == 5.0


def test_a_pass_keeps_its_longest_slice_and_the_checkpoints_written() -> None:
    from sparkmirror.core.checkpoints import CheckpointPass

    plan = CheckpointPass(["a", "b", "c"], 5.0, 0.0, slice_size=1)
    for seconds, written in ((0.2, 3), (0.9, 0), (0.1, 2)):
        plan.next_slice()
        plan.slice_done(seconds, written)
    assert (plan.longest_s, plan.written) == (0.9, 5)
