"""The offset map's home on the target cluster: its topic, loading, writing and pruning."""

from sparkmirror.offsets.store import OffsetMapStore, offset_map_topic

__all__ = ["OffsetMapStore", "offset_map_topic"]
