"""The driver prunes the offset map below the target's log starts at most every ``PRUNE_EVERY_S`` (the
default checkpoint interval), not at every checkpoint pass: each prune asks the target for every remote
partition's log start."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from sparkmirror.pipeline.driver import flow as flow_module
from sparkmirror.pipeline.driver.flow import PRUNE_EVERY_S, Flow


@pytest.fixture
def flow(monkeypatch: pytest.MonkeyPatch) -> Any:
    clock = [100.0]
    asked: list[dict[Any, Any]] = []
    answers: list[Exception | None] = []

    def list_offsets(admin: object, request: dict[Any, Any]) -> dict[tuple[str, int], int]:
        asked.append(request)
        failure = answers.pop(0) if answers else None
        if failure is not None:
            raise failure
        return {(tp.topic, tp.partition): 7 for tp in request}

    monkeypatch.setattr(flow_module, "list_offsets", list_offsets)
    monkeypatch.setattr(flow_module, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    pruned: list[dict[tuple[str, int], int]] = []
    me = SimpleNamespace(
        subscribed={"t": 2},
        topics=SimpleNamespace(remote_name=lambda t: f"A.{t}"),
        clients=SimpleNamespace(target_admin=object()),
        store=SimpleNamespace(prune=pruned.append),
        _pruned_at=None,
    )
    return SimpleNamespace(me=me, clock=clock, asked=asked, answers=answers, pruned=pruned)


def prune(f: Any) -> None:
    Flow._prune_offset_map(f.me)


def test_the_first_pass_prunes_then_not_again_before_the_interval(flow: Any) -> None:
    prune(flow)
    assert flow.pruned == [{("t", 0): 7, ("t", 1): 7}]  # by source partition, each at its remote's start
    flow.clock[0] += PRUNE_EVERY_S - 1
    prune(flow)
    assert len(flow.asked) == 1  # the target was not asked again
    flow.clock[0] += 1
    prune(flow)
    assert len(flow.asked) == 2 and len(flow.pruned) == 2


def test_a_failed_prune_is_tried_again_at_the_next_pass(flow: Any) -> None:
    flow.answers.append(RuntimeError("target down"))
    with pytest.raises(RuntimeError):
        prune(flow)
    assert flow.pruned == []
    flow.clock[0] += 5
    prune(flow)  # not held back by the failed one
    assert len(flow.asked) == 2 and len(flow.pruned) == 1
