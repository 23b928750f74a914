"""``offsets index-history`` on real brokers: a remote topic written as MM2 writes one (records copied with
their key, value, timestamp and headers, a restart's replay, an unrelated record, copies whose source
records retention removed), MM2's position in Connect's offsets topic, sparkmirror's progress and first
segment after it; the map it writes translates every offset to the record's last copy, a rerun resumes,
and a partition whose logs do not match is refused with its offsets."""

from __future__ import annotations

import json
from pathlib import Path

from kafka_helpers import (
    Rec,
    commit_group,
    create_topics,
    produce,
    read_partition,
    run_cli,
    unique,
    varied_records,
    write_config,
)
from sparkmirror.config import load_config
from sparkmirror.core.naming import progress_group
from sparkmirror.core.offsetmap import Method, Segment
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.kafka.mm2offsets import handback_records
from sparkmirror.offsets.store import OffsetMapStore, read_offset_map


def _delete_below(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.delete_records([TopicPartition(topic, partition, offset)], request_timeout=30).values():
        fut.result()


def _mm2_offsets_topic(bootstrap: str) -> str:
    """A Connect offsets topic on B of this test's own (``offset.storage.topic``), compacted as Connect
    requires: MM2's default one is left to the tests that run MM2 on the session's clusters (a worker
    refuses to start on an offsets topic that is not compacted)."""
    name = unique("mm2-offsets")
    create_topics(bootstrap, {name: 1}, {"cleanup.policy": "compact"})
    return name


def test_index_history_maps_mm2s_copies_exactly_resumes_and_refuses_what_does_not_match(
    bootstraps: dict[str, str], tmp_path: Path
) -> None:
    a, b = bootstraps["A"], bootstraps["B"]
    topic = unique("history")
    remote = f"A.{topic}"
    create_topics(a, {topic: 3})
    create_topics(b, {remote: 3})
    src = {p: varied_records(p, 310 if p == 0 else 150) for p in range(3)}
    for p, recs in src.items():
        produce(a, topic, p, recs)

    # Partition 0: MM2 copied 0..199, restarted from 150 and copied 150..304, and was killed after its last
    # commit (next: 300). Then sparkmirror adopted 300 and copied 300..309 at remote 355..364 (its segment
    # below): MM2's copies of 300..304 are left out, sparkmirror's count.
    copies0 = [*range(0, 200), *range(150, 305)]
    produce(b, remote, 0, [src[0][u] for u in copies0])
    # Partition 1: an unrelated record in the middle (remote offset 100).
    unrelated = Rec(b"who", b"knows", (), src[1][0].timestamp)
    produce(b, remote, 1, [*src[1][:100], unrelated, *src[1][100:150]])
    # Partition 2: a plain copy, whose first 40 source records retention removed since.
    produce(b, remote, 2, src[2])
    _delete_below(a, topic, 2, 40)

    mm2_topic = _mm2_offsets_topic(b)
    produce(
        b,
        mm2_topic,
        0,
        [Rec(k, v, (), 0) for k, v in handback_records({(topic, 0): 300, (topic, 1): 150, (topic, 2): 150}, "A", {})],
    )
    commit_group(b, progress_group("A", "B"), {(remote, 0): 310, (remote, 1): 150, (remote, 2): 150})
    cfg = write_config(
        tmp_path / "mm2.properties",
        a,
        b,
        extra=f"A->B.topics = {topic}\noffset.storage.topic = {mm2_topic}\n",
    )
    flow = load_config(cfg).flow("A->B")
    store = OffsetMapStore(FlowClients(flow))
    store.ensure_topic()
    produce(b, remote, 0, src[0][300:310])
    store.write([Segment(topic, 0, 300, 355, 10)])  # sparkmirror's own first segment
    store.close()

    first = run_cli("offsets", "index-history", str(cfg), timeout_s=300)
    print(first.stdout)
    assert first.returncode == 1, first.stdout + first.stderr[-3000:]  # partition 1 refused
    assert "Traceback" not in first.stderr
    lines = {line.split()[0]: line for line in first.stdout.splitlines() if line.startswith("  ")}
    assert (
        f"indexed  {remote}[0] offsets 0 to 354: 350 records mapped to source offsets 0 to 299 in 2 segments; "
        "50 copies of records MM2 had copied before" in lines[f"{topic}[0]"]
    )
    assert "5 copies of records from MM2's position on" in lines[f"{topic}[0]"]
    assert f"refused  {remote}[1] offset 100 copies no record of {topic}[1]" in lines[f"{topic}[1]"]
    assert "expected was offset 100" in lines[f"{topic}[1]"]
    assert f"{remote}[2] offsets 0 to 149: 110 records mapped to source offsets 40 to 149" in lines[f"{topic}[2]"]
    assert "40 copies at the remote's start whose source records retention removed" in lines[f"{topic}[2]"]
    assert "summary: 3 partitions (2 indexed, 1 refused); 460 records mapped in 3 segments" in first.stdout

    om = read_offset_map(FlowClients(flow).target_consumer, flow)
    got = {p: read_partition(b, remote, p) for p in range(3)}
    last_copy = {u: d for d, u in enumerate(copies0)} | {u: 355 + u - 300 for u in range(300, 310)}
    for g, d in last_copy.items():
        t = om.translate(topic, 0, g)
        assert (t.downstream_offset, t.method) == (d, Method.EXACT), (g, t)
        assert got[0][d] == src[0][g]
    for g in range(100):  # before the refusal: mapped and durable
        assert om.translate(topic, 1, g).downstream_offset == g
    below = om.translate(topic, 2, 10)  # the source no longer holds it: the earliest mapped copy
    assert (below.method, below.downstream_offset) == (Method.BELOW_HISTORY, 40)
    for g in range(40, 150):
        assert om.translate(topic, 2, g).downstream_offset == g

    again = run_cli("offsets", "index-history", str(cfg), "--json", timeout_s=300)
    assert again.returncode == 1, again.stdout + again.stderr[-3000:]
    print(again.stdout)
    parts = {p["partition"]: p for p in json.loads(again.stdout)[0]["partitions"]}
    assert [parts[p]["status"] for p in range(3)] == ["done", "refused", "done"]
    assert parts[0]["detail"].startswith("already indexed"), parts[0]  # MM2's 5 copies past its commit read again
    assert parts[1]["remote_from"] == 100 and "offset 100 copies no record" in parts[1]["detail"]
    assert "offset 100 copies no record" in again.stderr  # resumed at 100 and refused there again
    assert "Traceback" not in again.stderr
    assert len(read_offset_map(FlowClients(flow).target_consumer, flow).partition(topic, 0) or []) == len(
        om.partition(topic, 0) or []
    )


def test_index_history_while_the_flow_runs_leaves_its_map_exact_and_a_restart_loads_it(
    bootstraps: dict[str, str], tmp_path: Path
) -> None:
    """Safe while the flow runs (no lease): history segments land below the running writer's, which
    goes on extending its own; the map read afterwards, and the flow restarted on it, translate every
    offset to its last copy, and nothing is copied twice."""
    from kafka_helpers import end_offsets, running_mirror, wait_for

    a, b = bootstraps["A"], bootstraps["B"]
    topic = unique("history-live")
    remote = f"A.{topic}"
    create_topics(a, {topic: 2})
    create_topics(b, {remote: 2})
    src = {p: varied_records(p, 520) for p in range(2)}
    for p in range(2):
        produce(a, topic, p, src[p][:300])
    # MM2's history: partition 0 replayed 100..199 after a restart; both stopped cleanly at 200.
    copies = {0: [*range(200), *range(100, 200)], 1: list(range(200))}
    for p in range(2):
        produce(b, remote, p, [src[p][u] for u in copies[p]])
    mm2_topic = _mm2_offsets_topic(b)
    produce(
        b,
        mm2_topic,
        0,
        [Rec(k, v, (), 0) for k, v in handback_records({(topic, 0): 200, (topic, 1): 200}, "A", {})],
    )
    cfg = write_config(
        tmp_path / "mm2.properties",
        a,
        b,
        extra=f"A->B.topics = {topic}\noffset.storage.topic = {mm2_topic}\n",
    )
    mm2_end = {p: len(copies[p]) for p in range(2)}

    def copied(n: int) -> bool:
        ends = end_offsets(b, remote)
        return all(ends.get(p, 0) >= mm2_end[p] + n - 200 for p in range(2))

    with running_mirror(cfg):
        wait_for(lambda: copied(300), timeout_s=300, what="sparkmirror to adopt MM2's position and copy")
        for p in range(2):
            produce(a, topic, p, src[p][300:400])
        done = run_cli("offsets", "index-history", str(cfg), "--json", timeout_s=300)
        for p in range(2):
            produce(a, topic, p, src[p][400:500])
        wait_for(lambda: copied(500), timeout_s=300, what="sparkmirror to copy on while the history was indexed")
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    parts = {p["partition"]: p for p in json.loads(done.stdout)[0]["partitions"]}
    assert [(parts[p]["status"], parts[p]["records"]) for p in range(2)] == [("indexed", 300), ("indexed", 200)]

    def last_copies(end: int) -> dict[int, dict[int, int]]:
        """Per partition, source offset -> remote offset of its last copy; B holds MM2's copies, then every
        record from 200 to ``end`` once, in order (records are told apart by their timestamps)."""
        out: dict[int, dict[int, int]] = {}
        for p in range(2):
            gs = [src[p].index(rec) for rec in read_partition(b, remote, p)]
            assert gs == [*copies[p], *range(200, end)], f"{remote}[{p}]: copied twice or lost"
            out[p] = {g: d for d, g in enumerate(gs)}
        return out

    def check_map(end: int) -> None:
        om = read_offset_map(FlowClients(flow).target_consumer, flow)
        for p, where in last_copies(end).items():
            for g, d in where.items():
                t = om.translate(topic, p, g)
                assert (t.downstream_offset, t.method) == (d, Method.EXACT), (p, g, t)

    flow = load_config(cfg).flow("A->B")
    check_map(500)
    # A restart loads the map with the history in it (out of write order) and copies on.
    for p in range(2):
        produce(a, topic, p, src[p][500:520])
    again = run_cli("run", str(cfg), "--once", timeout_s=600)
    assert again.returncode == 0, again.stdout + again.stderr[-3000:]
    assert copied(520)
    check_map(520)


def test_a_remote_topic_with_log_append_time_is_refused_then_indexed_without_timestamps(
    bootstraps: dict[str, str], tmp_path: Path
) -> None:
    a, b = bootstraps["A"], bootstraps["B"]
    topic = unique("history-lat")
    remote = f"A.{topic}"
    create_topics(a, {topic: 1})
    create_topics(b, {remote: 1}, {"message.timestamp.type": "LogAppendTime"})
    src = varied_records(0, 100)
    produce(a, topic, 0, src)
    produce(b, remote, 0, src)  # B stamps each record with the time it appended it
    mm2_topic = _mm2_offsets_topic(b)
    produce(b, mm2_topic, 0, [Rec(k, v, (), 0) for k, v in handback_records({(topic, 0): 100}, "A", {})])
    commit_group(b, progress_group("A", "B"), {(remote, 0): 100})
    cfg = write_config(
        tmp_path / "mm2.properties",
        a,
        b,
        extra=f"A->B.topics = {topic}\noffset.storage.topic = {mm2_topic}\n",
    )

    refused = run_cli("offsets", "index-history", str(cfg), timeout_s=300)
    assert refused.returncode == 1, refused.stdout + refused.stderr[-3000:]
    assert f"{remote}[0] offset 0 copies none of the first 100 records" in refused.stdout, refused.stdout
    plain = run_cli("offsets", "index-history", str(cfg), "--ignore-timestamps", timeout_s=300)
    assert plain.returncode == 0, plain.stdout + plain.stderr[-3000:]
    assert f"{remote}[0] offsets 0 to 99: 100 records mapped to source offsets 0 to 99 in 1 segments" in plain.stdout
    flow = load_config(cfg).flow("A->B")
    om = read_offset_map(FlowClients(flow).target_consumer, flow)
    assert [om.translate(topic, 0, g).downstream_offset for g in range(100)] == list(range(100))
