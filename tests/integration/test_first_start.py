"""A flow's first start over a remote topic that already holds records nothing explains: refused before
any record is copied (exit 2, naming the topic and the ways on), unless the operator says what to do;
and ``handback mm2`` refused while sparkmirror runs the flow."""

from __future__ import annotations

import time
from pathlib import Path

from kafka_helpers import (
    Rec,
    create_topics,
    end_offsets,
    produce,
    read_partition,
    run_cli,
    running_mirror,
    unique,
    wait_for,
    write_config,
)


def _recs(first: int, n: int) -> list[Rec]:
    now = int(time.time() * 1000)
    return [Rec(None, f"v{i}".encode(), (), now) for i in range(first, first + n)]


def test_records_of_unknown_origin_are_refused_then_started_at_the_end_on_request(
    bootstraps: dict[str, str], tmp_path: Path
) -> None:
    topic = unique("existing")
    remote = f"A.{topic}"
    create_topics(bootstraps["A"], {topic: 2})
    create_topics(bootstraps["B"], {remote: 2})
    for p in range(2):
        produce(bootstraps["A"], topic, p, _recs(0, 100))
    produce(bootstraps["B"], remote, 0, _recs(0, 60))  # written by something sparkmirror knows nothing of
    cfg = write_config(
        tmp_path / "mm2.properties", bootstraps["A"], bootstraps["B"],
        extra=f"A->B.topics = {topic}\n",
    )  # fmt: skip

    refused = run_cli("run", str(cfg), "--once", timeout_s=600)
    assert refused.returncode == 2, refused.stdout + refused.stderr[-3000:]
    text = refused.stdout + refused.stderr
    assert f"{remote} [0] end 60 (60 records)" in text and "already hold records" in text
    assert "--existing-records start-at-end" in text and "--mm2-offsets-topic" in text
    assert "Traceback" not in text
    assert end_offsets(bootstraps["B"], remote) == {0: 60, 1: 0}, "a refused start copied records"

    started = run_cli("run", str(cfg), "--once", "--existing-records", "start-at-end", timeout_s=600)
    assert started.returncode == 0, started.stdout + started.stderr[-3000:]
    # Partition 0 starts at A's end (its 60 records taken as mirrored); partition 1 held nothing: copied whole.
    assert end_offsets(bootstraps["B"], remote) == {0: 60, 1: 100}

    # From then on the flow has state of its own: new records are copied, with no flag.
    for p in range(2):
        produce(bootstraps["A"], topic, p, _recs(100, 5))
    later = run_cli("run", str(cfg), "--once", timeout_s=600)
    assert later.returncode == 0, later.stdout + later.stderr[-3000:]
    for p, before in ((0, 60), (1, 100)):
        got = [r.value for r in read_partition(bootstraps["B"], remote, p)]
        assert got[before:] == [f"v{i}".encode() for i in range(100, 105)]


def test_handback_is_refused_while_sparkmirror_runs_the_flow(bootstraps: dict[str, str], tmp_path: Path) -> None:
    topic = unique("held")
    create_topics(bootstraps["A"], {topic: 1})
    produce(bootstraps["A"], topic, 0, _recs(0, 10))
    cfg = write_config(
        tmp_path / "mm2.properties", bootstraps["A"], bootstraps["B"],
        extra=f"A->B.topics = {topic}\n",
    )  # fmt: skip
    with running_mirror(cfg):
        wait_for(
            lambda: end_offsets(bootstraps["B"], f"A.{topic}").get(0, 0) >= 10,
            timeout_s=120,
            what="the mirror to copy",
        )
        back = run_cli("handback", "mm2", str(cfg), timeout_s=300)
    assert back.returncode == 6, back.stdout + back.stderr[-3000:]
    assert "Traceback" not in back.stderr
