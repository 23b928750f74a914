"""The offset map's home on the target cluster: its topic, loading, writing and pruning."""

from sparkmirror.core.naming import offset_map_topic
from sparkmirror.offsets.store import OffsetMapStore, read_offset_map

__all__ = ["OffsetMapStore", "offset_map_topic", "read_offset_map"]
