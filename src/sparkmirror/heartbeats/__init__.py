"""MM2-format heartbeats: liveness and latency visible end to end."""

from sparkmirror.heartbeats.emitter import HeartbeatEmitter

__all__ = ["HeartbeatEmitter"]
