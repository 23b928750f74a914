"""The offset map's home on the target cluster (its topic, loading, writing and pruning), and MM2's
offset syncs written beside it."""

from sparkmirror.core.naming import offset_map_topic
from sparkmirror.offsets.store import OffsetMapStore, read_offset_map
from sparkmirror.offsets.syncs import OffsetSyncWriter

__all__ = ["OffsetMapStore", "OffsetSyncWriter", "offset_map_topic", "read_offset_map"]
