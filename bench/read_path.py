"""The Python cost of a task's read, write and acknowledgement over the transport, a record at a time.

No JVM and no broker: the transport's sockets are replaced by queues of frames built here, so what is
timed is the task's own Python (``StreamTask._read``, the transport consumer's decoding, ``Sink.write``,
the transport producer's encoding and its acknowledgements), with ``PER_READ`` records a read, each of
another partition (500 partitions: at 1,000 partitions and 5,000 records/s a read holds about one record
of a partition). It reads frames as the code it runs writes them, so it runs on older code too::

    PYTHONPATH=<checkout>/src .venv/bin/python bench/read_path.py [PER_READ [READS]]
    .venv/bin/python bench/read_path.py --socket     # one socket read: 1 MiB asked, 64 KiB, no select

Prints CPU µs a record (``time.process_time``). docs/performance.md, "Each partition's records
together", has what it found.
"""

from __future__ import annotations

import gc
import select
import socket
import struct
import sys
import threading
import time
from typing import Any

PARTS = 500
VALUE = b"x" * 100


def socket_reads(n: int = 50_000) -> None:
    """A 2 KB frame sent and read back, the ways a task's connection could read it."""
    a, b = socket.socketpair()
    msg = b"x" * 2000
    for name, size in (("select, recv 1 MiB", 1 << 20), ("select, recv 64 KiB", 1 << 16)):
        start = time.perf_counter()
        for _ in range(n):
            a.send(msg)
            select.select([b], [], [], 0)
            b.recv(size)
        print(f"{name}: {(time.perf_counter() - start) / n * 1e6:.1f} µs a frame (the send too)")
    for name, size in (("recv 1 MiB, MSG_DONTWAIT", 1 << 20), ("recv 64 KiB, MSG_DONTWAIT", 1 << 16)):
        start = time.perf_counter()
        for _ in range(n):
            a.send(msg)
            b.recv(size, socket.MSG_DONTWAIT)
        print(f"{name}: {(time.perf_counter() - start) / n * 1e6:.1f} µs a frame (the send too)")


def read_path(per_read: int, reads: int) -> None:
    from sparkmirror.core.policy import DefaultReplicationPolicy
    from sparkmirror.core.ranges import OPEN_END, SourceRange
    from sparkmirror.pipeline.executor.plan import WritePlan
    from sparkmirror.pipeline.executor.sink import Sink
    from sparkmirror.pipeline.executor.stream import StreamTask
    from sparkmirror.pipeline.transport import client, frames

    grouped = "tstype" not in frames.FRAMES[("R", "consumer", "to python")]  # before 2026-11-30: a record at a time

    class Conn:
        def __init__(self, *_args: Any) -> None:
            self.incoming: list[tuple[str, bytes]] = []
            self.closed = False
            self.recv_lock = threading.Lock()

        def send(self, data: bytes) -> None:
            pass

        def next(self, _timeout: float) -> tuple[str, bytes] | None:
            return self.incoming.pop() if self.incoming else None

        def close(self) -> None:
            pass

    client._Connection = Conn  # type: ignore[misc,assignment]
    consumer = client.TransportConsumer({})
    producer = client.TransportProducer({})
    from confluent_kafka import TopicPartition

    consumer.assign([TopicPartition("t", p, 0) for p in range(PARTS)])
    consumer._moved.clear()

    class Commit:
        serving = threading.Lock()

        def producer_for(self, _key: Any) -> Any:
            return producer

        def open(self, _parts: Any) -> None:
            pass

        def begin(self, w: Any) -> None:
            w.begun = True

    plan = WritePlan(
        flow="A->B", source_alias="A", policy=DefaultReplicationPolicy(), producer_config={},
        max_record_bytes={"A.t": 1_000_000},
    )  # fmt: skip
    sink = Sink(plan, Commit())  # type: ignore[arg-type]
    task = StreamTask(plan, 0, [SourceRange("t", p, 0, OPEN_END) for p in range(PARTS)])
    task.next = {("t", p): 0 for p in range(PARTS)}
    offsets = [0] * PARTS
    ts = int(time.time() * 1000)
    record_frames, ack_frames = [], []
    first = 0
    for _ in range(reads):
        pids = [(first + j) % PARTS for j in range(per_read)]
        first = (first + per_read) % PARTS
        body = bytearray(struct.pack(">ii", 1, len(pids)))
        for pid in pids:
            if grouped:
                body += struct.pack(">ii", pid, 1) + struct.pack(">qqi", offsets[pid], ts, 3) + b"key"
            else:
                body += struct.pack(">iqbqi", pid, offsets[pid], 1, ts, 3) + b"key"
            body += struct.pack(">i", len(VALUE)) + VALUE + b"\0\0\0\0"
        body += struct.pack(">i", len(pids))
        for pid in pids:
            body += struct.pack(">iqq", pid, offsets[pid] + 1, offsets[pid] + 1)
        body += b"\0\0\0\0"
        record_frames.append(bytes(body))
        acks = bytearray(struct.pack(">i", len(pids)))
        for pid in pids:
            acks += struct.pack(">iqiqi", pid, offsets[pid], 1, offsets[pid], 0)
        ack_frames.append(acks)
        for pid in pids:
            offsets[pid] += 1
    gc.disable()
    start = time.process_time()
    for i in range(reads):
        consumer._conn.incoming.append(("R", record_frames[i]))  # type: ignore[attr-defined]
        task._read(consumer, sink, 0.0, 10_000)  # type: ignore[arg-type]
        producer._send()
        acks = ack_frames[i]
        for j in range(struct.unpack_from(">i", acks, 0)[0]):  # the producer's ids, given in first-use order
            pid = struct.unpack_from(">i", acks, 4 + 28 * j)[0]
            struct.pack_into(">i", acks, 4 + 28 * j, producer._parts.ids[("A.t", pid)])
        producer._conn.incoming.append(("A", bytes(acks)))  # type: ignore[attr-defined]
        producer.poll(0)
        if i % 2000 == 1999:  # an interval's end: what was acknowledged is let go
            for w in sink.parts.values():
                w.sent.clear()
                w.ds.clear()
    spent = time.process_time() - start
    print(f"{per_read} records a read ({'grouped' if grouped else 'a record at a time'}): "
          f"{spent / (reads * per_read) * 1e6:.2f} µs a record ({spent:.2f} s)")  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1:2] == ["--socket"]:
        socket_reads()
    else:
        n = int(sys.argv[1]) if len(sys.argv) > 1 else 25
        read_path(n, int(sys.argv[2]) if len(sys.argv) > 2 else max(2_000, 500_000 // n))
