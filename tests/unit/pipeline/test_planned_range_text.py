"""Reading a batch's planned ranges from the text Spark prints for its partitions (pipeline/ranges.py).

The real shape, read from a live query, is tests/integration/test_planned_ranges.py; here the parser
alone: every range found, nothing made up, and any doubt sends the reader back to the field-by-field path.
"""

from __future__ import annotations

from sparkmirror.core.ranges import SourceRange
from sparkmirror.pipeline.ranges import parse_range_text

PARAMS = '{bootstrap.servers=127.0.0.1:9092, sasl.jaas.config=x required password="s3cret";, group.id=g}'


def _partition(topic: str, p: int, start: int, until: int, loc: str = "None") -> str:
    """One input partition as Spark 4.2 prints its DataSourceRDD's ``inputPartitions``."""
    offset_range = f"KafkaOffsetRange({topic}-{p},{start},{until},{loc})"
    return f"Some(KafkaBatchInputPartition({offset_range},{PARAMS},120000,false,true))"


def test_every_range_is_read_with_dashes_and_dots_in_topic_names() -> None:
    text = (
        "List("
        + ", ".join(
            [
                _partition("orders", 0, 0, 40),
                _partition("A.orders-eu", 12, 100, 155, "Some(executor_host_1)"),
                _partition("a_b-c.d", 3, 7, 7),
            ]
        )
        + ")"
    )
    assert parse_range_text(text) == [
        SourceRange("orders", 0, 0, 40),
        SourceRange("A.orders-eu", 12, 100, 155),
        SourceRange("a_b-c.d", 3, 7, 7),
    ]


def test_an_input_partition_without_a_readable_range_sends_the_reader_field_by_field() -> None:
    text = "List(" + _partition("orders", 0, 0, 40) + ", Some(KafkaBatchInputPartition(X)))"
    assert parse_range_text(text) is None


def test_text_of_another_shape_is_not_read() -> None:
    assert parse_range_text("List()") is None
    assert parse_range_text("List(Some(SomethingElse(1,2)))") is None
