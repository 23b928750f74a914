"""A copy loop in Python over Kafka's Java clients (``bench/jvm/TransportLoop.java``): the transport probe.

Each of ``--tasks`` processes owns a round-robin share of the partitions, as a streaming task does,
and runs one ``TransportLoop`` JVM (one consumer, one producer). The JVM hands every record it reads
to Python over a pipe; Python decodes it, decides what to write (here: the same record to the remote
topic's partition of the same number, where ``sink.py``'s record rules would run) and hands it back;
the JVM writes it and returns each acknowledgement, which Python matches to its source offset and
turns into the partition's next offset, as a task's progress would. With no record rules, offset map
or progress on B, its latency is a floor for a task with the Java clients as its transport.
``bench/latency_probe.py --system transport`` runs it; docs/decisions.md, "Java clients as the
task's transport", has what it found.

    .venv/bin/python bench/transport_loop.py SOURCE TARGET TOPICS REMOTES --tasks 2 \\
        --classpath CP --producer FILE [--java-option OPT ...] [--shared-jvm]

``--shared-jvm`` runs one JVM for all tasks (as one per Spark executor would be), each task
connected to it over a loopback socket, in place of one JVM per task over its pipes.
"""

from __future__ import annotations

import argparse
import socket
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO

from confluent_kafka.admin import AdminClient

_HEAD = struct.Struct(">bi")
_INT = struct.Struct(">i")
_READ = struct.Struct(">iqq")  # pair, offset, timestamp
_WRITE = struct.Struct(">qiq")  # seq, pair, timestamp
_ACK = struct.Struct(">qq")  # seq, target offset

Bytes = bytes | None


def _exactly(stream: IO[bytes], n: int) -> bytes:
    data = stream.read(n)
    if len(data) != n:
        raise SystemExit(f"the transport closed its pipe ({len(data)} of {n} bytes)")
    return data


def _take(body: memoryview, pos: int) -> tuple[Bytes, int]:
    n = _INT.unpack_from(body, pos)[0]
    pos += 4
    if n < 0:
        return None, pos
    return bytes(body[pos : pos + n]), pos + n


def _put(out: bytearray, b: Bytes) -> None:
    if b is None:
        out += _INT.pack(-1)
    else:
        out += _INT.pack(len(b))
        out += b


def records(body: memoryview) -> list[tuple[int, int, int, Bytes, Bytes, list[tuple[bytes, Bytes]]]]:
    """An 'R' frame's records: (pair, offset, timestamp, key, value, headers)."""
    out: list[tuple[int, int, int, Bytes, Bytes, list[tuple[bytes, Bytes]]]] = []
    pos = 4
    for _ in range(_INT.unpack_from(body, 0)[0]):
        pair, offset, ts = _READ.unpack_from(body, pos)
        key, pos = _take(body, pos + _READ.size)
        value, pos = _take(body, pos)
        count = _INT.unpack_from(body, pos)[0]
        pos += 4
        headers: list[tuple[bytes, Bytes]] = []
        for _h in range(count):
            hk, pos = _take(body, pos)
            hv, pos = _take(body, pos)
            headers.append((hk or b"", hv))
        out.append((pair, offset, ts, key, value, headers))
    return out


def task(reader: IO[bytes], writer: IO[bytes]) -> None:
    """One task's loop over its transport's streams: read, decide, write, match acknowledgements."""
    seq = 0
    pending: dict[int, tuple[int, int]] = {}  # seq -> (pair, source offset)
    done: dict[int, int] = {}  # pair -> next source offset whose record is acknowledged (a task's progress)
    while True:
        kind, n = _HEAD.unpack(_exactly(reader, _HEAD.size))
        body = memoryview(_exactly(reader, n))
        if kind == ord("R"):
            batch = records(body)
            out = bytearray(b"P\0\0\0\0")
            out += _INT.pack(len(batch))
            for pair, offset, ts, key, value, headers in batch:
                seq += 1
                pending[seq] = (pair, offset)
                out += _WRITE.pack(seq, pair, ts)
                _put(out, key)
                _put(out, value)
                out += _INT.pack(len(headers))
                for hk, hv in headers:
                    _put(out, hk)
                    _put(out, hv)
            struct.pack_into(">i", out, 1, len(out) - _HEAD.size)
            writer.write(out)
            writer.flush()
        else:
            for i in range(_INT.unpack_from(body, 0)[0]):
                s, _target_offset = _ACK.unpack_from(body, 4 + i * _ACK.size)
                pair, offset = pending.pop(s)
                done[pair] = offset + 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source")
    ap.add_argument("target")
    ap.add_argument("topics", help="comma-separated")
    ap.add_argument("remotes", help="comma-separated, one per topic")
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--classpath", required=True)
    ap.add_argument("--producer", required=True, help="the producer's properties file")
    ap.add_argument("--java-option", action="append", default=[])
    ap.add_argument("--shared-jvm", action="store_true", help="one JVM for all tasks, over loopback sockets")
    ap.add_argument("--task", default="", help=argparse.SUPPRESS)  # a task process: its assignment file
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)  # a task process: the shared JVM
    args = ap.parse_args()
    java = ["java", *args.java_option, "-cp", args.classpath, "TransportLoop"]
    if args.task and args.port:
        sock = socket.create_connection(("127.0.0.1", args.port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        path = args.task.encode()
        sock.sendall(struct.pack(">H", len(path)) + path)  # Java's writeUTF, for an ASCII path
        task(sock.makefile("rb", buffering=1 << 16), sock.makefile("wb", buffering=1 << 16))
        return
    if args.task:
        jvm = subprocess.Popen([*java, args.source, args.target, args.task, args.producer],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
        assert jvm.stdin is not None and jvm.stdout is not None
        task(jvm.stdout, jvm.stdin)
        return
    remote = dict(zip(args.topics.split(","), args.remotes.split(","), strict=True))
    meta = AdminClient({"bootstrap.servers": args.source}).list_topics(timeout=30)
    pairs = [(t, p) for t in remote for p in sorted(meta.topics[t].partitions)]
    work = Path(tempfile.mkdtemp(prefix="transport-loop-"))
    procs = []
    port = []
    if args.shared_jvm:
        shared = subprocess.Popen([*java, "--listen", args.source, args.target, args.producer], stdout=subprocess.PIPE)
        assert shared.stdout is not None
        port = [f"--port={int(shared.stdout.readline())}"]
        procs.append(shared)
    for i in range(args.tasks):
        share = work / f"task-{i}.txt"
        share.write_text("".join(f"{t} {p} {remote[t]}\n" for t, p in pairs[i :: args.tasks]))
        procs.append(subprocess.Popen([sys.executable, __file__, *sys.argv[1:], *port, "--task", str(share)]))
    for proc in procs:
        proc.wait()


if __name__ == "__main__":
    main()
