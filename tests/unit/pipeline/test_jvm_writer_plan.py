"""The JVM writer's driver side: its clients' settings, the plan it sends, the rows it reads back."""

from __future__ import annotations

import json

import pytest

from sparkmirror.config import load_config
from sparkmirror.core import DefaultReplicationPolicy
from sparkmirror.core.offsetmap import extend_tail
from sparkmirror.core.ranges import SourceRange
from sparkmirror.errors import ConfigError
from sparkmirror.pipeline.executor.plan import WritePlan
from sparkmirror.pipeline.jvm import writer
from sparkmirror.pipeline.jvm.writer import (
    java_consumer_config,
    java_producer_config,
    java_progress_consumer_config,
    plan_json,
    result_from_row,
)

BASE = """\
clusters = A, B
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
A->B.enabled = true
"""


def _plan(**kwargs: object) -> WritePlan:
    return WritePlan(
        flow="A->B",
        source_alias="A",
        policy=DefaultReplicationPolicy(),
        producer_config={},
        writer="jvm",
        java_producer_config={"bootstrap.servers": "b:9092", "sasl.jaas.config": "secret-jaas"},
        java_consumer_config={"bootstrap.servers": "a:9092"},
        **kwargs,  # type: ignore[arg-type]
    )


def _row(segments: list[list[int]], **kwargs: object) -> dict[str, object]:
    row: dict[str, object] = {
        "topic": "t",
        "partition": 0,
        "records": 10,
        "bytes": 100,
        "first_offset": 10,
        "last_offset": 19,
        "first_target_offset": 5,
        "last_target_offset": 14,
        "dead_lettered": 0,
        "max_timestamp_ms": 2,
        "min_timestamp_ms": 1,
        "read_at_ms": 3,
        "acked_at_ms": 4,
        "age_sum_ms": 5,
        "latency_sum_ms": 6,
        "error": None,
        "segments": segments,
        "writer": "jvm:1@host",
    }
    row.update(kwargs)
    return row


def test_producer_keeps_safety_over_the_operators_settings() -> None:
    conf = java_producer_config(
        {"bootstrap.servers": "b:9092", "acks": "1", "max.in.flight.requests.per.connection": "10"}, "A->B"
    )
    assert conf["acks"] == "all"
    assert conf["enable.idempotence"] == "true"
    assert conf["max.in.flight.requests.per.connection"] == "5"
    assert conf["linger.ms"] == "5"
    assert java_producer_config({"linger.ms": "20"}, "A->B")["linger.ms"] == "20"


def test_consumer_reads_committed_records_and_joins_no_group() -> None:
    conf = java_consumer_config({"bootstrap.servers": "a:9092", "group.id": "g", "fetch.max.wait.ms": "5"}, "A->B")
    assert conf["isolation.level"] == "read_committed"
    assert conf["enable.auto.commit"] == "false"
    assert "group.id" not in conf
    assert conf["fetch.max.wait.ms"] == "5"  # the operator's, over the reader's default


def test_plan_names_remote_topics_and_their_limits_only() -> None:
    plan = _plan(max_record_bytes={"A.t": 2000, "A.other": 10}, errors_tolerance="all", dead_letter_topic="dlq")
    sent = json.loads(plan_json(plan, [SourceRange("t", 0, 0, 10)]))
    assert sent["remotes"] == {"t": "A.t"}
    assert sent["limits"] == {"A.t": 2000}
    assert sent["errors_tolerance"] == "all"
    assert sent["dead_letter_topic"] == "dlq"
    assert sent["producer"]["sasl.jaas.config"] == "secret-jaas"  # the JVM's clients need it ...
    assert "secret-jaas" not in repr(plan)  # ... and the plan never shows it


def test_rows_become_results_and_extend_the_partitions_tail() -> None:
    plan = _plan(tails={("t", 0): (0, 100, 10)})
    r = result_from_row(_row([[10, 110, 5], [15, 120, 5]]), plan)
    assert r.segments == ((0, 100, 15), (15, 120, 5))
    assert (r.topic, r.partition, r.records, r.writer) == ("t", 0, 10, "jvm:1@host")
    other = result_from_row(_row([[10, 111, 5]]), plan)  # not adjacent on the target: kept apart
    assert other.segments == ((10, 111, 5),)


def test_extend_tail_joins_only_when_both_sides_continue() -> None:
    assert extend_tail([(5, 50, 2)], (0, 45, 5)) == [(0, 45, 7)]
    assert extend_tail([(5, 51, 2)], (0, 45, 5)) == [(5, 51, 2)]
    assert extend_tail([(6, 50, 2)], (0, 45, 5)) == [(6, 50, 2)]
    assert extend_tail([], (0, 45, 5)) == []
    assert extend_tail([(5, 50, 2)], None) == [(5, 50, 2)]


def test_jvm_writer_with_sparks_reader_is_refused() -> None:
    with pytest.raises(ConfigError, match="sparkmirror.writer = jvm") as err:
        load_config(BASE + "sparkmirror.writer = jvm\nsparkmirror.source.reader = spark\n")  # type: ignore[arg-type]
    assert err.value.exit_code == 2


def test_writer_defaults_to_python_and_takes_jvm_also_exactly_once() -> None:
    assert load_config(BASE).flows[0].spark.writer == "python"  # type: ignore[arg-type]
    assert load_config(BASE + "sparkmirror.writer = jvm\n").flows[0].spark.writer == "jvm"  # type: ignore[arg-type]
    eos = load_config(BASE + "sparkmirror.writer = jvm\nexactly.once.source.support = enabled\n").flows[0]  # type: ignore[arg-type]
    assert (eos.spark.writer, eos.exactly_once) == ("jvm", True)


def test_exactly_once_ranges_name_their_transactional_id_and_the_plan_its_progress() -> None:
    plan = _plan(
        exactly_once=True,
        transaction_groups=4,
        target_alias="B",
        progress_group="pg",
        offset_map_topic="om",
        producer_generation="gen1",
        writers={"tid": "jvm:1@host"},
        tails={("t", 1): (0, 100, 10), ("elsewhere", 0): (1, 2, 3)},
        java_progress_consumer_config=java_progress_consumer_config(
            {"bootstrap.servers": "b:9092", "group.id": "theirs"}, "A->B", "pg"
        ),
    )
    ranges = [SourceRange("t", 0, 0, 10), SourceRange("t", 1, 10, 20)]
    sent = json.loads(plan_json(plan, ranges))
    assert sent["exactly_once"] is True
    assert (sent["progress_group"], sent["offset_map_topic"], sent["generation"]) == ("pg", "om", "gen1")
    assert sent["progress_consumer"]["group.id"] == "pg"  # the progress group, not the operator's
    assert sent["progress_consumer"]["isolation.level"] == "read_committed"
    assert sent["writers"] == {"tid": "jvm:1@host"}
    assert sent["tails"] == [["t", 1, 0, 100, 10]]  # only the round's partitions
    assert [writer._range(r, plan) for r in ranges] == [
        ["t", 0, 0, 10, plan.transactional_id("t", 0)],
        ["t", 1, 10, 20, plan.transactional_id("t", 1)],
    ]
    assert writer._range(ranges[0], _plan()) == ["t", 0, 0, 10]  # at least once: no id
