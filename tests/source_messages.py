"""A source record as the copy task's consumer hands it over, for tests without a broker.

It offers what the copy reads of a ``confluent_kafka.Message`` (``Message`` itself can be built in
Python only by recent confluent-kafka releases, newer than the oldest the project supports), and
(:meth:`SourceMessage.record`) the record a read hands the sink."""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import KafkaError


@dataclass
class SourceMessage:
    t: str = "t"
    p: int = 0
    o: int = 0
    k: bytes | None = b"k"
    v: bytes | None = b"v"
    #: The record's timestamp in ms (its type is CreateTime; -1 or 0: none).
    ts: int = 1
    hdrs: list[tuple[str, bytes | None]] | None = None
    err: KafkaError | None = None

    def error(self) -> KafkaError | None:
        return self.err

    def topic(self) -> str:
        return self.t

    def partition(self) -> int:
        return self.p

    def offset(self) -> int:
        return self.o

    def key(self) -> bytes | None:
        return self.k

    def value(self) -> bytes | None:
        return self.v

    def timestamp(self) -> tuple[int, int]:
        return (1, self.ts)

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return self.hdrs

    def record(self) -> tuple[int, bytes | None, bytes | None, int, list[tuple[str, bytes | None]] | None]:
        """As ``pipeline/executor/clients.py``'s ``take`` hands it to the sink."""
        return (self.o, self.k, self.v, self.ts, self.hdrs)


def messages(topic: str, partition: int, offsets: range) -> list[SourceMessage]:
    """Records of one partition at these offsets."""
    return [SourceMessage(topic, partition, o) for o in offsets]


def records(
    topic: str, partition: int, offsets: range
) -> list[tuple[int, bytes | None, bytes | None, int, list[tuple[str, bytes | None]] | None]]:
    """The same, as a read hands them to the sink."""
    return [m.record() for m in messages(topic, partition, offsets)]
