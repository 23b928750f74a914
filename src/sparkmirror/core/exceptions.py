"""Errors raised by the core: record decoding, the offset map and checkpoint rules.

All derive from :class:`sparkmirror.errors.SparkMirrorError` and carry their whole
state in ``args`` so that they survive pickling (Spark ships exceptions from the
executors to the driver). This module must never import pyspark or a Kafka client.
"""

from __future__ import annotations

from sparkmirror.errors import SparkMirrorError

__all__ = ["CoreError", "FormatError", "NotLoadedError", "OffsetMapError"]


class CoreError(SparkMirrorError):
    """Base of the core's errors."""


class FormatError(CoreError):
    """An internal record could not be decoded or encoded: truncated bytes, an unknown
    version, a string too long for the Kafka protocol's int16 length. The message names
    the record type and the field. Terminal: the same bytes will fail the same way."""


class OffsetMapError(CoreError):
    """A segment or a query given to the offset map is invalid (negative offsets, count < 1)."""


class NotLoadedError(CoreError):
    """Translation or checkpoint emission was asked for before the backing topic was read
    to its end (the KAFKA-13659 rule). Retriable: it succeeds once loading finishes."""

    retriable = True
