"""MirrorMaker 2's committed source offsets in Connect's offsets topic on the target: read (``run``
adopts them) and written (``handback mm2``). The record format is :mod:`sparkmirror.core.connect_offsets`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from sparkmirror.core.connect_offsets import DEDICATED_CONNECTOR, SourcePosition, encode_key, encode_value, latest
from sparkmirror.kafka.internal import read_to_end

#: Connect's defaults for an offsets topic it creates (``offset.storage.partitions``, compacted).
CONNECT_OFFSETS_PARTITIONS = 25


def mm2_positions(consumer_conf: Mapping[str, str], topic: str, source: str) -> dict[tuple[str, int], SourcePosition]:
    """MM2's position per source partition of cluster ``source`` (empty when the topic does not exist)."""
    return latest(read_to_end(consumer_conf, topic), source)


def handback_records(
    positions: Mapping[tuple[str, int], int], source: str, known: Mapping[tuple[str, int], SourcePosition]
) -> list[tuple[bytes, bytes]]:
    """The offsets-topic records that make MM2 resume each partition at ``positions[(topic, partition)]``
    (the next source offset to copy; partitions at 0 have nothing copied and are left out): under the
    connector name already in the topic for that partition, else the one of MM2's other partitions, else
    MM2's dedicated-mode name."""
    # A partition MM2 never copied goes under the name MM2's other partitions have (a Connect cluster's
    # connector is named by its operator), else MM2's dedicated-mode name.
    names = Counter(p.connector for p in known.values())
    default = names.most_common(1)[0][0] if names else DEDICATED_CONNECTOR
    out = []
    for (topic, partition), next_offset in sorted(positions.items()):
        if next_offset <= 0:
            continue
        before = known.get((topic, partition))
        connector = before.connector if before is not None else default
        out.append((encode_key(connector, source, topic, partition), encode_value(next_offset - 1)))
    return out
