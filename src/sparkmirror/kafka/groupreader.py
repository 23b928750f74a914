"""Committed offsets of many consumer groups, read concurrently and out of harm's way.

The checkpoint emitter reads the offsets of every source group each
interval. One consumer per group (:mod:`sparkmirror.kafka.groups`) costs a
client, its connections, a coordinator lookup and an OffsetFetch for every
mirrored partition, per group, one group after the other: about 45 ms a group,
a minute for 1,000 groups. Kafka's admin ``ListConsumerGroupOffsets`` costs one
OffsetFetch per group on a connection already open, and many can be in flight
at once (confluent-kafka 2.16 takes one group per call, librdkafka sends one
group per request; the futures overlap).

That admin call crashes the whole process in librdkafka (2.16.0, and still on
its master branch): an OffsetFetch answered ``NOT_COORDINATOR`` or
``COORDINATOR_NOT_AVAILABLE`` makes ``rd_kafka_handle_OffsetFetch`` queue a
coordinator query on the client's consumer-group handle, which an admin client
does not have (SIGSEGV). Brokers answer so while a ``__consumer_offsets``
partition loads or after its leader moved. So the admin client lives in a
child process (``python -m sparkmirror.kafka.groupreader``) that this module
starts, feeds and restarts: a crash costs the reads then in flight, which
come back as failed, and the caller reads those groups through the consumer
path that handles coordinator errors. See docs/decisions.md.

This module must never let a group read as "no offsets" when its read failed:
failures are reported apart from answers.
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

#: A group's committed positions: (topic, partition) -> (offset, commit metadata).
Positions = dict[tuple[str, int], tuple[int, str]]

#: Test hook: the child kills itself with SIGSEGV after answering this many groups.
CRASH_HOOK = "SPARKMIRROR_TEST_GROUPREADER_CRASH_AFTER"


@dataclass
class GroupReads:
    """What one :meth:`GroupOffsetReader.read` learned: answers and failures kept apart."""

    positions: dict[str, Positions] = field(default_factory=dict)
    #: group -> why its offsets are unknown (read it another way, or skip it this pass).
    failed: dict[str, str] = field(default_factory=dict)


class GroupOffsetReader:
    """Reads the committed offsets of many groups of one cluster through an admin client in a child process.

    ``conf``: librdkafka settings of an admin client of the cluster (secrets
    included: they travel through the child's stdin, never its command line).
    ``in_flight``: how many groups' reads overlap. Not thread-safe: one chore
    owns it.
    """

    def __init__(self, conf: Mapping[str, str], *, in_flight: int = 64, name: str = "") -> None:
        self._conf = dict(conf)
        self._in_flight = in_flight
        self._name = name
        self._proc: subprocess.Popen[bytes] | None = None
        self._buffer = b""
        #: How many times the child died under a read (tests and the status read it).
        self.crashes = 0

    def read(self, groups: Sequence[str], *, timeout_s: float = 10.0) -> GroupReads:
        """Every group's committed offsets (all its partitions); the groups not answered are in ``failed``."""
        out = GroupReads()
        if not groups:
            return out
        try:
            proc = self._start()
            assert proc.stdin is not None
            proc.stdin.write(json.dumps({"groups": list(groups), "timeout": timeout_s}).encode() + b"\n")
            proc.stdin.flush()
        except OSError as exc:
            self._stop()
            out.failed = dict.fromkeys(groups, f"group offset reader not available: {exc}")
            return out
        # Each group is answered within its request timeout; a silent child is stuck.
        silence_s = timeout_s + 30.0
        while True:
            line = self._readline(silence_s)
            if line is None:
                break
            msg = json.loads(line)
            if msg.get("end"):
                return self._complete(out, groups)
            group = msg["group"]
            if "error" in msg:
                out.failed[group] = msg["error"]
            else:
                out.positions[group] = {(t, p): (o, m) for t, p, o, m in msg["offsets"]}
        status = self._stop()
        self.crashes += 1
        how = f"killed by signal {-status}" if status is not None and status < 0 else f"exit status {status}"
        log.warning(
            "%sgroup offset reader died (%s) with %d of %d groups unanswered; "
            "those are read through consumers (librdkafka's admin OffsetFetch crash, docs/decisions.md)",
            self._name,
            how,
            len(groups) - len(out.positions) - len(out.failed),
            len(groups),
        )
        return self._complete(out, groups, reason=f"group offset reader died ({how})")

    @staticmethod
    def _complete(out: GroupReads, groups: Sequence[str], *, reason: str = "not answered") -> GroupReads:
        for group in groups:
            if group not in out.positions and group not in out.failed:
                out.failed[group] = reason
        return out

    def close(self) -> None:
        """Stop the child (it also stops by itself when this process goes: its stdin closes)."""
        self._stop()

    # -- the child process ------------------------------------------------------
    def _start(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._buffer = b""
        proc = subprocess.Popen(
            [sys.executable, "-m", "sparkmirror.kafka.groupreader"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
            start_new_session=True,  # a Ctrl-C is the parent's to handle; the child ends with its stdin
        )
        self._proc = proc
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"conf": self._conf, "in_flight": self._in_flight}).encode() + b"\n")
        proc.stdin.flush()
        return proc

    def _readline(self, silence_s: float) -> bytes | None:
        """The child's next line, or None when it died or said nothing for ``silence_s``."""
        proc = self._proc
        if proc is None or proc.stdout is None:
            return None
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + silence_s
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                log.warning("%sgroup offset reader silent for %.0fs; stopping it", self._name, silence_s)
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def _stop(self) -> int | None:
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass
        try:
            return proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait(5)


def _serve() -> None:
    """The child: one admin client; requests and answers are JSON lines on stdin and stdout."""
    import concurrent.futures
    import signal

    from confluent_kafka import ConsumerGroupTopicPartitions

    from sparkmirror.kafka.factory import new_admin

    # librdkafka's lines come through Python logging (kafka/factory.py): to stderr, which this
    # child shares with the mirror's process.
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s (group offset reader): %(message)s"
    )
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    hello = json.loads(stdin.readline())
    admin = new_admin(hello["conf"])
    in_flight = int(hello["in_flight"])
    crash_after = int(os.environ.get(CRASH_HOOK, "0") or 0)
    answered = 0

    def answer(msg: Mapping[str, object]) -> None:
        stdout.write(json.dumps(msg).encode() + b"\n")
        stdout.flush()

    for line in stdin:
        request = json.loads(line)
        pending = list(reversed(request["groups"]))
        timeout = float(request["timeout"])
        running: dict[concurrent.futures.Future[ConsumerGroupTopicPartitions], str] = {}
        while pending or running:
            while pending and len(running) < in_flight:
                group = pending.pop()
                try:
                    futures = admin.list_consumer_group_offsets(
                        [ConsumerGroupTopicPartitions(group)], require_stable=True, request_timeout=timeout
                    )
                except Exception as exc:  # noqa: BLE001 - reported for this group, the others go on
                    answer({"group": group, "error": str(exc)})
                    continue
                running[futures[group]] = group
            done, _ = concurrent.futures.wait(running, timeout=0.5, return_when=concurrent.futures.FIRST_COMPLETED)
            admin.poll(0)  # serves librdkafka's log lines to the logger
            for fut in done:
                group = running.pop(fut)
                try:
                    result = fut.result()
                except Exception as exc:  # noqa: BLE001 - reported for this group
                    answer({"group": group, "error": str(exc)})
                    continue
                tps = result.topic_partitions or []
                errors = [f"{tp.topic}[{tp.partition}]: {tp.error}" for tp in tps if tp.error is not None]
                if errors:
                    # A partition left out would read as "no offset" and could be rewritten.
                    answer({"group": group, "error": "; ".join(errors[:3])})
                else:
                    offsets = [[tp.topic, tp.partition, tp.offset, tp.metadata or ""] for tp in tps if tp.offset >= 0]
                    answer({"group": group, "offsets": offsets})
                answered += 1
                if crash_after and answered >= crash_after:
                    os.kill(os.getpid(), signal.SIGSEGV)
        answer({"end": True})


if __name__ == "__main__":
    _serve()
