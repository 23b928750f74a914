"""MirrorMaker 2's source offsets in Connect's offsets topic: the record format, byte for byte."""

from __future__ import annotations

import pytest

from sparkmirror.core.connect_offsets import decode, encode_key, encode_value, latest, offsets_topic
from sparkmirror.kafka.mm2offsets import handback_records


def _java_hashmap_order(keys: list[str]) -> list[str]:
    """java.util.HashMap's iteration order for a few keys in a 16-bucket table (String.hashCode, spread)."""

    def bucket(k: str) -> int:
        h = 0
        for c in k:
            h = (31 * h + ord(c)) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & 15

    return sorted(keys, key=bucket)


def test_the_key_is_connects_json_in_javas_hashmap_order() -> None:
    # MirrorUtils.wrapPartition puts topic, partition, cluster into a HashMap; JsonConverter writes it in
    # iteration order, compact. Connect finds an offset by the key's bytes: they must be these.
    assert _java_hashmap_order(["topic", "partition", "cluster"]) == ["cluster", "partition", "topic"]
    key = encode_key("MirrorSourceConnector", "A", "orders", 2)
    assert key == b'["MirrorSourceConnector",{"cluster":"A","partition":2,"topic":"orders"}]'
    assert encode_value(399) == b'{"offset":399}'


def test_a_record_decodes_to_mm2s_position_and_its_next_offset() -> None:
    pos = decode(b'["mm2-source", {"topic": "t", "partition": 0, "cluster": "A"}]', b'{"offset": 41}')
    assert pos is not None
    assert (pos.connector, pos.cluster, pos.topic, pos.partition, pos.offset, pos.next_offset) == (
        "mm2-source",
        "A",
        "t",
        0,
        41,
        42,
    )


@pytest.mark.parametrize(
    "key",
    [
        None,
        b"",
        b"not json",
        b'{"cluster":"A"}',
        b'["MirrorCheckpointConnector",{"cluster":"A","group":"g","topic":"t","partition":0}]',
        b'["MirrorHeartbeatConnector",{"sourceClusterAlias":"A","targetClusterAlias":"B"}]',
        b'["x",{"cluster":"A","partition":"0","topic":"t"}]',
    ],
)
def test_other_connectors_keys_are_not_mm2_source_positions(key: bytes | None) -> None:
    assert decode(key, b'{"offset":1}') is None


def test_a_value_without_an_integer_offset_is_an_error_naming_the_key() -> None:
    with pytest.raises(ValueError, match=r"orders\[0\] of cluster A"):
        decode(encode_key("MirrorSourceConnector", "A", "orders", 0), b'{"offset":"12"}')


def test_the_last_record_of_a_key_wins_a_tombstone_forgets_and_other_sources_are_ignored() -> None:
    k0 = encode_key("MirrorSourceConnector", "A", "t", 0)
    k1 = encode_key("MirrorSourceConnector", "A", "t", 1)
    other = encode_key("MirrorSourceConnector", "C", "t", 0)
    records = [
        (k0, encode_value(5)),
        (k1, encode_value(7)),
        (other, encode_value(100)),
        (k0, encode_value(9)),
        (k1, None),
    ]
    got = latest(records, "A")
    assert {k: v.offset for k, v in got.items()} == {("t", 0): 9}


def test_two_connectors_of_one_source_keep_the_lower_position_and_others_bad_values_stop_nothing() -> None:
    records = [
        (encode_key("mirror-to-b", "A", "t", 0), encode_value(50)),
        (encode_key("mirror-to-c", "A", "t", 0), encode_value(20)),
        (encode_key("other", "C", "t", 0), b"not json"),  # another source's record is never parsed
    ]
    got = latest(records, "A")
    assert (got[("t", 0)].connector, got[("t", 0)].offset) == ("mirror-to-c", 20)


def test_handback_writes_the_last_copied_offset_under_the_connector_name_already_there() -> None:
    known = latest([(encode_key("mirror-a-b", "A", "t", 0), encode_value(3))], "A")
    records = handback_records({("t", 0): 10, ("t", 1): 5, ("t", 2): 0}, "A", known)
    assert records == [
        (b'["mirror-a-b",{"cluster":"A","partition":0,"topic":"t"}]', b'{"offset":9}'),
        # A partition MM2 never copied: under the name of MM2's other partitions.
        (b'["mirror-a-b",{"cluster":"A","partition":1,"topic":"t"}]', b'{"offset":4}'),
    ]
    fresh = handback_records({("t", 0): 1}, "A", {})
    assert fresh == [(b'["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"t"}]', b'{"offset":0}')]


def test_the_offsets_topic_is_mm2s_dedicated_name_unless_configured() -> None:
    assert offsets_topic("A") == "mm2-offsets.A.internal"
    assert offsets_topic("A", " connect-offsets ") == "connect-offsets"
