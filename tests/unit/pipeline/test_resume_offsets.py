"""Where each partition of a starting flow resumes: the later of the progress on the target and the offset
map's end, in both modes (exactly once too: an idle partition's progress expires, and the map's end then
still says where it stands, where the progress alone would start it again from the log start)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from sparkmirror.pipeline.driver import flow as flow_module
from sparkmirror.pipeline.driver.flow import Flow


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_a_partition_resumes_at_the_later_of_its_progress_and_the_maps_end(
    monkeypatch: pytest.MonkeyPatch, exactly_once: bool
) -> None:
    progress = {("A.t", 0): 40, ("A.t", 1): 12, ("A.u", 0): 0}  # t[2]: expired; u[0]: --reset-topic
    asked: list[Any] = []

    def committed_offsets(conf: Any, group: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        asked.append((group, sorted(partitions)))
        return {k: v for k, v in progress.items() if k in partitions}

    monkeypatch.setattr(flow_module, "committed_offsets", committed_offsets)
    tails = {("t", 0): (30, 30, 10), ("t", 1): (10, 10, 5), ("t", 2): (50, 48, 8)}
    me = SimpleNamespace(
        flow=SimpleNamespace(exactly_once=exactly_once),
        recorder=SimpleNamespace(plan=SimpleNamespace(consumer_config={}, progress_group="progress")),
        topics=SimpleNamespace(remote_name=lambda t: f"A.{t}"),
        store=SimpleNamespace(tails=lambda: tails),
    )
    starts = Flow._resume_offsets(me, {"t": 4, "u": 1})  # type: ignore[arg-type]
    assert starts == {"t": {"0": 40, "1": 15, "2": 58, "3": -2}, "u": {"0": 0}}
    assert asked == [("progress", [("A.t", 0), ("A.t", 1), ("A.t", 2), ("A.t", 3), ("A.u", 0)])]
