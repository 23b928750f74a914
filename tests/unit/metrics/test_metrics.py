"""The metrics a run exports, from the tasks' result rows, without Spark or Kafka."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sparkmirror.metrics import METRIC_NAMES, MirrorMetrics
from sparkmirror.pipeline.executor.results import PartitionResult

DOCS = Path(__file__).resolve().parents[3] / "docs"


def _result(partition: int, records: int, *, dead: int = 0, ts: tuple[int, int] = (1_000, 3_000)) -> PartitionResult:
    read_at, acked_at = 10_000, 10_500
    ts_sum = (ts[0] + ts[1]) * records // 2  # a spread whose mean is the midpoint
    return PartitionResult(
        "orders",
        partition,
        records,
        records * 10,
        0,
        records - 1,
        0,
        records - 1,
        dead,
        ts[1],
        ts[0],
        read_at,
        acked_at,
        read_at * records - ts_sum,
        acked_at * records - ts_sum,
        None,
        (),
    )


def _samples(m: MirrorMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(m.registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }


def _labels(partition: int) -> tuple[tuple[str, str], ...]:
    return (("partition", str(partition)), ("source", "A"), ("target", "B"), ("topic", "A.orders"))


def test_a_batch_counts_records_bytes_dead_letters_age_and_latency_per_remote_partition() -> None:
    m = MirrorMetrics()
    flow = m.flow("A", "B", lambda t: f"A.{t}")
    flow.batch([_result(0, 10), _result(1, 4, dead=1), _result(2, 0)], 0.3, 1234.0)
    flow.batch([_result(0, 5)], 0.2, 1235.0)
    s = _samples(m)
    assert s[("sparkmirror_record_count_total", _labels(0))] == 15
    assert s[("sparkmirror_record_count_total", _labels(1))] == 3  # the dead-lettered one is not mirrored
    assert s[("sparkmirror_dead_lettered_total", _labels(1))] == 1
    assert s[("sparkmirror_byte_count_total", _labels(0))] == 150
    assert ("sparkmirror_record_count_total", _labels(2)) not in s  # nothing new there
    assert s[("sparkmirror_record_age_ms", _labels(0))] == 10_000 - 2_000
    assert s[("sparkmirror_record_age_ms_min", _labels(0))] == 7_000
    assert s[("sparkmirror_record_age_ms_max", _labels(0))] == 9_000
    assert s[("sparkmirror_replication_latency_ms_max", _labels(0))] == 9_500
    flow_labels = (("source", "A"), ("target", "B"))
    assert s[("sparkmirror_batch_duration_seconds_count", flow_labels)] == 2
    assert s[("sparkmirror_last_batch_timestamp_seconds", flow_labels)] == 1235.0


def test_lag_loss_state_and_checkpoints_are_exported() -> None:
    m = MirrorMetrics()
    flow = m.flow("A", "B", lambda t: f"A.{t}")
    flow.lag({("orders", 0): (25, 3.5)})
    flow.lost("orders", 0, 7)
    flow.state("restarting")
    flow.restarted()
    flow.checkpoint_cycle(42.0, 3, 99.0, {"app": 98.0, "gone": 50.0})
    flow.checkpoint_cycle(40.0, 0, 109.0, {"app": 108.0})
    s = _samples(m)
    groups = {dict(k[1])["group"]: v for k, v in s.items() if k[0] == "sparkmirror_group_checkpoint_timestamp_seconds"}
    assert groups == {"app": 108.0}  # a group gone from the source is dropped
    assert s[("sparkmirror_lag_records", _labels(0))] == 25
    assert s[("sparkmirror_lag_seconds", _labels(0))] == 3.5
    assert s[("sparkmirror_records_lost_total", _labels(0))] == 7
    states = {k[1]: v for k, v in s.items() if k[0] == "sparkmirror_flow_state"}
    assert [dict(lb)["sparkmirror_flow_state"] for lb, v in states.items() if v == 1] == ["restarting"]
    assert s[("sparkmirror_checkpoint_count_total", (("source", "A"), ("target", "B")))] == 3


def test_every_exported_metric_is_explained_in_the_operations_guide() -> None:
    m = MirrorMetrics()
    exported = {f.name + ("_total" if f.type == "counter" else "") for f in m.registry.collect()}
    assert exported == set(METRIC_NAMES)
    guide = (DOCS / "operations.md").read_text()
    missing = [n for n in METRIC_NAMES if f"`{n}`" not in guide]
    assert not missing, f"docs/operations.md does not explain {missing}"
    # And the alert rules and the dashboard use only metrics that exist.
    used = set(re.findall(r"sparkmirror_[a-z_]+", (DOCS / "operations" / "alerts.yml").read_text()))
    used |= set(re.findall(r"sparkmirror_[a-z_]+", (DOCS / "operations" / "grafana-dashboard.json").read_text()))
    histogram_parts = {f"sparkmirror_batch_duration_seconds{s}" for s in ("_bucket", "_count", "_sum")}
    unknown = used - set(METRIC_NAMES) - histogram_parts
    assert not unknown, unknown


def test_a_metrics_port_in_use_is_a_configuration_error_naming_the_key() -> None:
    import socket

    import pytest

    from sparkmirror.errors import ConfigError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match="sparkmirror.metrics.port: cannot serve metrics on 127.0.0.1"):
            MirrorMetrics().serve("127.0.0.1", port)
