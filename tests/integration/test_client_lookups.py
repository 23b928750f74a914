"""The client API against real brokers: the same answers as Kafka's own RemoteClusterUtils,
and lookups that read only what was appended since the last one.

Checkpoints are written with :class:`sparkmirror.core.formats.Checkpoint` straight into a
``<alias>.checkpoints.internal`` topic on B (the layout is proven against Kafka's client in
``test_mm2_client_reads_checkpoints.py``). Every test has its own source alias ``S<uuid8>``,
so its checkpoints topic is its own; other tests create topics on the same clusters at the
same time, so cluster-wide answers are compared with care.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient

from kafka_helpers import Rec, create_topics, produce, unique, wait_for
from mm2_client import remote_cluster_names, replication_hops_with_mm2, translate_offsets_with_mm2
from sparkmirror import client
from sparkmirror.client import CheckpointsTopicNotFoundError, ClientError, MirrorClient, TopicPartition
from sparkmirror.core.formats import Checkpoint


@pytest.fixture(scope="module")
def mm2_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mm2client")


@pytest.fixture
def mirror_client(bootstraps: dict[str, str]) -> Iterator[MirrorClient]:
    with MirrorClient(bootstraps["B"], timeout_s=60) as mc:
        yield mc


def _alias() -> str:
    return f"S{uuid.uuid4().hex[:8]}"


def _checkpoints_topic(bootstrap: str, alias: str, *, separator: str = ".") -> str:
    topic = f"{alias}{separator}checkpoints{separator}internal"
    create_topics(bootstrap, {topic: 1}, {"cleanup.policy": "compact"})
    return topic


def _write(bootstrap: str, topic: str, checkpoints: list[Checkpoint], tombstones: Sequence[Checkpoint] = ()) -> None:
    now = int(time.time() * 1000)
    records = [Rec(c.key_bytes(), c.value_bytes(), (), now) for c in checkpoints]
    records += [Rec(c.key_bytes(), None, (), now) for c in tombstones]
    produce(bootstrap, topic, 0, records)


def _tp(alias: str, topic: str, partition: int) -> TopicPartition:
    return TopicPartition(f"{alias}.{topic}", partition)


def test_translate_offsets_equals_kafkas_remote_cluster_utils(bootstraps, mm2_workdir: Path) -> None:
    b, alias = bootstraps["B"], _alias()
    topic = _checkpoints_topic(b, alias)
    group, other = unique("app"), unique("other")
    orders, payments = f"{alias}.orders", f"{alias}.payments"
    _write(
        b,
        topic,
        [
            Checkpoint(group, orders, 0, 100, 90),
            Checkpoint(group, orders, 1, 10, 7, metadata="m"),
            Checkpoint(group, orders, 2, 5_000_000_000, 4_000_000_001),
            Checkpoint(other, orders, 0, 1, 1),
            Checkpoint(group, payments, 0, 3, 0),
            Checkpoint(group, orders, 1, 25, 20),  # the same key again: the later wins
            Checkpoint(group, orders, 0, 80, 75),  # ... even when lower
        ],
    )
    client.clear_cache()
    try:
        for g in (group, other, unique("absent")):
            ours = client.translate_offsets(b, alias, g, timeout_s=60)
            kafkas = translate_offsets_with_mm2(b, alias, g, workdir=mm2_workdir)
            assert {(tp.topic, tp.partition): o for tp, o in ours.items()} == kafkas
            assert all(type(tp) is TopicPartition for tp in ours)
        assert client.translate_offsets(b, alias, group) == {
            TopicPartition(orders, 0): 75,
            TopicPartition(orders, 1): 20,
            TopicPartition(orders, 2): 4_000_000_001,
            TopicPartition(payments, 0): 0,
        }
    finally:
        client.clear_cache()


def test_topic_queries_equal_kafkas_remote_cluster_utils(bootstraps, mm2_workdir: Path) -> None:
    b, alias, further = bootstraps["B"], _alias(), _alias()
    checkpoints = _checkpoints_topic(b, alias)
    # Heartbeats replicated from `alias` (one hop) and from `further` through `alias` (two).
    create_topics(b, {f"{alias}.heartbeats": 1, f"{alias}.{further}.heartbeats": 1, f"{alias}.orders": 1})
    client.clear_cache()
    try:
        queries = {
            "heartbeatTopics": lambda: client.heartbeat_topics(b),
            "checkpointTopics": lambda: client.checkpoint_topics(b),
            "upstreamClusters": lambda: client.upstream_clusters(b),
        }
        for mode, ours in queries.items():
            before = ours()
            kafkas = remote_cluster_names(mode, b, workdir=mm2_workdir)
            after = ours()
            # Other tests create and delete topics meanwhile: what was there before and after
            # must be in Kafka's answer, and all of Kafka's answer in ours at one of the times.
            assert before & after <= kafkas <= before | after, mode
        assert checkpoints in client.checkpoint_topics(b)
        assert {f"{alias}.heartbeats", f"{alias}.{further}.heartbeats"} <= client.heartbeat_topics(b)
        assert f"{alias}.orders" not in client.heartbeat_topics(b)
        assert {alias, further} <= client.upstream_clusters(b)
        for upstream, hops in ((alias, 1), (further, 2), (_alias(), -1)):
            assert client.replication_hops(b, upstream) == hops
            assert replication_hops_with_mm2(b, upstream, workdir=mm2_workdir) == hops
    finally:
        client.clear_cache()


def test_a_later_lookup_reads_only_the_records_appended_since(bootstraps, mirror_client: MirrorClient) -> None:
    b, alias = bootstraps["B"], _alias()
    topic = _checkpoints_topic(b, alias)
    groups = [unique("g") for _ in range(20)]
    _write(b, topic, [Checkpoint(g, f"{alias}.orders", p, 10 + p, 5 + p) for g in groups for p in range(4)])
    index = mirror_client.index(alias)

    first = mirror_client.translate_offsets(alias, groups[3])
    assert first == {_tp(alias, "orders", p): 5 + p for p in range(4)}
    assert index.records_read == 80  # the first lookup reads the topic from its start

    for g in groups:
        mirror_client.translate_offsets(alias, g)
    assert index.records_read == 80  # nothing new: nothing read

    _write(b, topic, [Checkpoint(groups[7], f"{alias}.orders", 2, 500, 400)])
    got = mirror_client.translate_offsets(alias, groups[7])
    assert index.records_read == 81  # exactly the one new record
    assert got[_tp(alias, "orders", 2)] == 400
    assert mirror_client.checkpoints(alias, groups[7])[_tp(alias, "orders", 2)].upstream_offset == 500

    _write(b, topic, [], tombstones=[Checkpoint(groups[7], f"{alias}.orders", 2, 0, 0)])
    assert _tp(alias, "orders", 2) not in mirror_client.translate_offsets(alias, groups[7])
    assert index.records_read == 82
    assert mirror_client.groups(alias) == set(groups)


def test_module_functions_reuse_their_client(bootstraps) -> None:
    b, alias = bootstraps["B"], _alias()
    topic = _checkpoints_topic(b, alias)
    group = unique("app")
    _write(b, topic, [Checkpoint(group, f"{alias}.orders", 0, 1, 1), Checkpoint(unique("x"), f"{alias}.a", 0, 1, 1)])
    client.clear_cache()
    try:
        assert client.translate_offsets(b, alias, group) == {_tp(alias, "orders", 0): 1}
        index = client.client_for(b).index(alias)
        assert index.records_read == 2
        _write(b, topic, [Checkpoint(group, f"{alias}.orders", 0, 9, 8)])
        assert client.translate_offsets(b, alias, group) == {_tp(alias, "orders", 0): 8}
        assert index.records_read == 3
    finally:
        client.clear_cache()


def test_separators_name_the_checkpoints_topic(bootstraps) -> None:
    # Kafka refuses names that differ only in '.' and '_': two aliases.
    b, underscored_alias, dotted_alias = bootstraps["B"], _alias(), _alias()
    group = unique("app")
    underscored = _checkpoints_topic(b, underscored_alias, separator="_")
    dotted = _checkpoints_topic(b, dotted_alias)
    _write(b, underscored, [Checkpoint(group, f"{underscored_alias}_orders", 0, 7, 6)])
    _write(b, dotted, [Checkpoint(group, f"{dotted_alias}_orders", 0, 3, 2)])
    with MirrorClient(b, separator="_") as mc:
        assert mc.translate_offsets(underscored_alias, group) == {TopicPartition(f"{underscored_alias}_orders", 0): 6}
        assert underscored in mc.checkpoint_topics() and dotted not in mc.checkpoint_topics()
        with pytest.raises(CheckpointsTopicNotFoundError):
            mc.translate_offsets(dotted_alias, group)
    # MM2's legacy naming: a custom separator for remote topics, '.' for internal ones.
    config = {"replication.policy.separator": "_", "replication.policy.internal.topic.separator.enabled": "false"}
    with MirrorClient(b, config=config) as mc:
        assert mc.translate_offsets(dotted_alias, group) == {TopicPartition(f"{dotted_alias}_orders", 0): 2}


def test_a_missing_checkpoints_topic_is_named(bootstraps, mirror_client: MirrorClient) -> None:
    alias = _alias()
    with pytest.raises(CheckpointsTopicNotFoundError, match=f"{alias}.checkpoints.internal"):
        mirror_client.translate_offsets(alias, "app")
    # Created later (the mirror started): the same client finds it.
    topic = _checkpoints_topic(bootstraps["B"], alias)
    _write(bootstraps["B"], topic, [Checkpoint("app", f"{alias}.orders", 0, 4, 4)])
    assert mirror_client.translate_offsets(alias, "app") == {_tp(alias, "orders", 0): 4}


def test_an_open_transaction_does_not_hold_a_lookup(bootstraps, mirror_client: MirrorClient) -> None:
    """The end is the last stable offset: a checkpoint in an open transaction is not waited for,
    and it shows once committed."""
    b, alias = bootstraps["B"], _alias()
    topic = _checkpoints_topic(b, alias)
    _write(b, topic, [Checkpoint("app", f"{alias}.orders", 0, 1, 1)])
    producer = Producer({"bootstrap.servers": b, "transactional.id": unique("txn")})
    producer.init_transactions(60)
    producer.begin_transaction()
    pending = Checkpoint("app", f"{alias}.orders", 0, 2, 2)
    producer.produce(topic, key=pending.key_bytes(), value=pending.value_bytes(), partition=0)
    producer.flush(30)

    t0 = time.monotonic()
    assert mirror_client.translate_offsets(alias, "app", timeout_s=20) == {_tp(alias, "orders", 0): 1}
    assert time.monotonic() - t0 < 10

    producer.commit_transaction(60)
    # The coordinator writes the commit marker after it acknowledged the commit: wait for it.
    wait_for(
        lambda: mirror_client.translate_offsets(alias, "app") == {_tp(alias, "orders", 0): 2},
        timeout_s=30,
        what="the committed checkpoint",
        interval_s=0.2,
    )


def test_concurrent_lookups_see_every_committed_checkpoint(bootstraps, mirror_client: MirrorClient) -> None:
    b, alias = bootstraps["B"], _alias()
    topic = _checkpoints_topic(b, alias)
    groups = [unique("g") for _ in range(8)]
    _write(b, topic, [Checkpoint(g, f"{alias}.orders", 0, 0, 0) for g in groups])
    errors: list[BaseException] = []

    def look(g: str) -> None:
        try:
            last = -1
            for _ in range(30):
                now = mirror_client.translate_offsets(alias, g)[_tp(alias, "orders", 0)]
                assert now >= last  # the writer below only moves forward
                last = now
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=look, args=(g,)) for g in groups]
    for t in threads:
        t.start()
    for step in range(1, 4):
        _write(b, topic, [Checkpoint(g, f"{alias}.orders", 0, step, step) for g in groups])
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert mirror_client.translate_offsets(alias, groups[0]) == {_tp(alias, "orders", 0): 3}
    assert mirror_client.index(alias).records_read == 32


def test_a_recreated_checkpoints_topic_is_read_again(bootstraps, mirror_client: MirrorClient) -> None:
    """A topic that ends before what the index already read was deleted and created again: the
    index starts over instead of keeping checkpoints that no longer exist."""
    b, alias = bootstraps["B"], _alias()
    topic = _checkpoints_topic(b, alias)
    _write(b, topic, [Checkpoint(g, f"{alias}.orders", 0, 5, 5) for g in ("gone", "app", "app")])
    assert mirror_client.translate_offsets(alias, "gone") == {_tp(alias, "orders", 0): 5}

    admin = AdminClient({"bootstrap.servers": b})
    for f in admin.delete_topics([topic], operation_timeout=30).values():
        f.result()
    wait_for(lambda: topic not in admin.list_topics(timeout=30).topics, timeout_s=60, what=f"{topic} deleted")

    def recreated() -> bool:
        try:
            create_topics(b, {topic: 1}, {"cleanup.policy": "compact"})
        except KafkaException:
            return False  # still being deleted
        return True

    wait_for(recreated, timeout_s=60, what=f"{topic} created again", interval_s=0.5)
    _write(b, topic, [Checkpoint("app", f"{alias}.orders", 0, 1, 1)])
    wait_for(
        lambda: _lookup_or_none(mirror_client, alias, "app") == {_tp(alias, "orders", 0): 1},
        timeout_s=60,
        what="the new topic's checkpoint",
        interval_s=0.5,
    )
    assert mirror_client.translate_offsets(alias, "gone") == {}


def _lookup_or_none(mc: MirrorClient, alias: str, group: str) -> dict[TopicPartition, int] | None:
    try:
        return mc.translate_offsets(alias, group, timeout_s=5)
    except ClientError:
        return None  # metadata of the new topic not there yet
