"""MirrorMaker 2's committed source offsets, as Kafka Connect keeps them in its offsets topic.

MM2's ``MirrorSourceConnector`` copies each source partition in a Connect task, and Connect commits
where the task stands to its offsets topic (dedicated mode: ``mm2-offsets.<source alias>.internal``
on the target cluster; a Connect cluster: its ``offset.storage.topic``). One record per source
partition, last one wins (the topic is compacted), written by Connect's ``JsonConverter`` without
schemas:

- key: ``["<connector name>",{"cluster":"<source alias>","partition":<n>,"topic":"<topic>"}]``
  (the connector's name is ``MirrorSourceConnector`` in dedicated mode, the name it was given on a
  Connect cluster; the map's fields come in the order Java's ``HashMap`` iterates them);
- value: ``{"offset":<offset of the last record copied>}``; MM2 resumes at that offset plus one. A
  record without a value (a tombstone) forgets the partition.

Connect looks an offset up by the key's bytes, so a key written for MM2 to read (``handback``) must
be byte for byte the key Connect writes: :func:`encode_key` writes it so, and keeps the connector
name and bytes of a key already in the topic where there is one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

#: The connector's name in MM2's dedicated mode (``MirrorMakerConfig``: the class's simple name).
DEDICATED_CONNECTOR = "MirrorSourceConnector"


def offsets_topic(source: str, configured: str = "") -> str:
    """The Connect offsets topic of a flow from ``source``: ``offset.storage.topic`` if set, else MM2's
    dedicated-mode name."""
    return configured.strip() or f"mm2-offsets.{source}.internal"


@dataclass(frozen=True)
class SourcePosition:
    """One source partition's entry in the offsets topic."""

    connector: str
    cluster: str
    topic: str
    partition: int
    #: Offset of the last record MM2 copied (it resumes at ``offset + 1``); None: a tombstone.
    offset: int | None

    @property
    def next_offset(self) -> int | None:
        """The first source offset MM2 has not copied (where it, or sparkmirror, resumes)."""
        return None if self.offset is None else self.offset + 1


def encode_key(connector: str, cluster: str, topic: str, partition: int) -> bytes:
    """The key Connect writes for MM2's source partition, byte for byte."""
    # JsonConverter: Jackson, compact; the partition map in java.util.HashMap's order for these three
    # keys (cluster, partition, topic), which tests/unit/core/test_connect_offsets.py pins.
    body = {"cluster": cluster, "partition": partition, "topic": topic}
    return json.dumps([connector, body], separators=(",", ":"), ensure_ascii=False).encode()


def encode_value(offset: int) -> bytes:
    """The value Connect writes for MM2's position: the offset of the last record copied."""
    return json.dumps({"offset": offset}, separators=(",", ":")).encode()


def decode(key: bytes | None, value: bytes | None, cluster: str | None = None) -> SourcePosition | None:
    """An offsets-topic record as MM2's source position; None for anything else (another connector's
    keys: MM2's checkpoint and heartbeat connectors, or any other source connector on the cluster), and
    for another source cluster's than ``cluster`` (if given), whose values are not read."""
    where = _partition_key(key)
    if where is None or (cluster is not None and where[1] != cluster):
        return None
    connector, source, topic, partition = where
    offset: int | None = None
    if value is not None:
        shown = f"{topic}[{partition}] of cluster {source} (connector {connector})"
        try:
            body = json.loads(value)
        except ValueError:
            raise ValueError(f"MM2's offset of {shown}: the value is not JSON: {value[:80]!r}") from None
        got = body.get("offset") if isinstance(body, dict) else None
        if type(got) is not int:
            raise ValueError(f"MM2's offset of {shown}: no integer offset in {value[:80]!r}")
        offset = got
    return SourcePosition(connector, source, topic, partition, offset)


def _partition_key(key: bytes | None) -> tuple[str, str, str, int] | None:
    """(connector, cluster, topic, partition) of a ``MirrorSourceConnector``-shaped key, else None."""
    if not key:
        return None
    try:
        parsed = json.loads(key)
    except ValueError:
        return None
    if not (isinstance(parsed, list) and len(parsed) == 2 and isinstance(parsed[0], str)):
        return None
    connector, where = parsed
    if not isinstance(where, dict) or set(where) != {"cluster", "partition", "topic"}:
        return None
    cluster, topic, partition = where["cluster"], where["topic"], where["partition"]
    if not (isinstance(cluster, str) and isinstance(topic, str) and type(partition) is int):
        return None
    return connector, cluster, topic, partition


def latest(records: Iterable[tuple[bytes | None, bytes | None]], cluster: str) -> dict[tuple[str, int], SourcePosition]:
    """The positions MM2 holds for source ``cluster``, from the offsets topic's records in the order they
    were written (per Kafka partition: Connect writes a key always to the same one): the last record
    of each key wins, a tombstone forgets it. A partition known under two connector names (two
    connectors from the same source on one Connect cluster) keeps the lower offset: at worst records
    copied again, never skipped."""
    by_key: dict[bytes, SourcePosition] = {}
    for key, value in records:
        pos = decode(key, value, cluster)
        if pos is None:
            continue
        assert key is not None
        if pos.offset is None:
            by_key.pop(key, None)
        else:
            by_key[key] = pos
    out: dict[tuple[str, int], SourcePosition] = {}
    for pos in by_key.values():
        known = out.get((pos.topic, pos.partition))
        if known is None or (pos.offset or 0) < (known.offset or 0):
            out[(pos.topic, pos.partition)] = pos
    return out
