"""A source topic deleted on purpose while the mirror runs: no longer copied (said in the log and
counted), the flow goes on with its other topics; its remote topic is left as it is, unless
``sparkmirror.sync.topic.deletions = true``, which deletes it once every record was mirrored and no
group on the target reads it."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from kafka_helpers import (
    admin,
    commit_group,
    create_topics,
    end_offsets,
    free_port,
    produce,
    running_mirror,
    scrape_metrics,
    unique,
    varied_records,
    wait_for,
    write_config,
)


def _delete(bootstrap: str, topic: str) -> None:
    client = admin(bootstrap)
    for f in client.delete_topics([topic], operation_timeout=30).values():
        f.result(timeout=60)


def _topics(bootstrap: str) -> set[str]:
    return set(admin(bootstrap).list_topics(timeout=30).topics)


def _deleted_counted(port: int, remote: str, name: str) -> float:
    return sum(v for lb, v in scrape_metrics(port).get(name, []) if lb.get("topic") == remote)


@pytest.mark.parametrize("sync", [False, True], ids=["remote-kept", "deletion-synced"])
def test_a_deleted_source_topic_stops_being_copied(
    bootstraps, spark, tmp_path: Path, caplog: pytest.LogCaptureFixture, sync: bool
):
    prefix = unique("del")
    gone, read, stays = f"{prefix}.gone", f"{prefix}.read", f"{prefix}.stays"
    create_topics(bootstraps["A"], {gone: 2, read: 1, stays: 1})
    for t, n in ((gone, 2), (read, 1), (stays, 1)):
        for p in range(n):
            produce(bootstraps["A"], t, p, varied_records(p, 30))
    port = free_port()
    cfg = write_config(
        tmp_path / "mm2.properties",
        bootstraps["A"],
        bootstraps["B"],
        extra=(
            f"A->B.topics = {prefix}\\..*\nrefresh.topics.interval.seconds = 2\n"
            f"sparkmirror.sync.topic.deletions = {str(sync).lower()}\n"
            f"sparkmirror.metrics.port = {port}\nsparkmirror.metrics.host = 127.0.0.1\n"
        ),
    )
    caplog.set_level(logging.INFO, logger="sparkmirror")
    with running_mirror(cfg) as errors:
        for t, n in ((gone, 60), (read, 30), (stays, 30)):
            wait_for(lambda t=t, n=n: sum(end_offsets(bootstraps["B"], f"A.{t}").values()) == n, timeout_s=180, what=t)
        # A consumer group on B has read A.<read>: its remote topic must stay whatever the setting.
        commit_group(bootstraps["B"], unique("reader"), {(f"A.{read}", 0): 10})
        _delete(bootstraps["A"], gone)
        _delete(bootstraps["A"], read)
        wait_for(
            lambda: (
                _deleted_counted(port, f"A.{gone}", "sparkmirror_source_topic_deletions_total") == 1
                and _deleted_counted(port, f"A.{read}", "sparkmirror_source_topic_deletions_total") == 1
            ),
            timeout_s=120,
            what="both deletions counted",
        )
        # The flow goes on with the topic that stays.
        produce(bootstraps["A"], stays, 0, varied_records(0, 20, first=30))
        wait_for(lambda: sum(end_offsets(bootstraps["B"], f"A.{stays}").values()) == 50, timeout_s=120, what="stays")
        if sync:
            wait_for(
                lambda: (
                    f"A.{gone}" not in _topics(bootstraps["B"])
                    and _deleted_counted(port, f"A.{gone}", "sparkmirror_remote_topic_deletions_total") == 1
                ),
                timeout_s=60,
                what="remote topic deleted and counted",
            )
            kept = f"remote topic A.{read} is not deleted yet: consumer groups on B read it"
            wait_for(
                lambda: any(kept in r.getMessage() for r in caplog.records),
                timeout_s=60,
                what="the reader's topic kept",
            )
        else:
            time.sleep(5)  # a few refreshes: nothing deletes it
        remotes = _topics(bootstraps["B"])
        assert (f"A.{gone}" in remotes) is not sync, sorted(remotes)
        assert f"A.{read}" in remotes  # a group reads it
        assert sum(end_offsets(bootstraps["B"], f"A.{read}").values()) == 30
        assert not errors, errors
    said = [r.getMessage() for r in caplog.records if "was deleted on A" in r.getMessage()]
    assert any(f"source topic {gone} was deleted on A: it is no longer copied" in m for m in said), said
