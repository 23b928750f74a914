"""Checkpoint emission (MM2's `<alias>.checkpoints.internal`) and group offset sync."""

from sparkmirror.checkpoints.emitter import CheckpointEmitter

__all__ = ["CheckpointEmitter"]
