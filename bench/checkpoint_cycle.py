"""The anatomy of one checkpoint cycle with many consumer groups (docs/performance.md).

Against a running source cluster A and target B (``sparkmirror dev up``):
creates ``--topics`` x ``--partitions`` topics on A, commits ``--groups``
groups at random positions (each on a few partitions of one topic), then times
the checkpoint emitter's passes, split into listing the groups, reading their
offsets, translating and deciding, and writing to B:

1. the first pass (every group new: all its checkpoints written),
2. a pass where nothing moved,
3. a pass after ``--moved`` of the groups committed again.

``--readers consumer,admin`` (the default) runs the three passes with each
reader in turn, on the same groups: ``consumer`` reads every group through a
consumer of its own, as the emitter did before issue 16; ``admin`` through the
group offset reader (its child process's CPU counted in); ``admin-sliced`` reads each pass in
the slices the flow's chore uses (``CheckpointPass``, back to back) and adds the longest slice.
The offset map is filled in memory (one segment per partition), so the figures are the checkpoint cycle's alone.

    .venv/bin/python bench/checkpoint_cycle.py --source 127.0.0.1:19092 --target 127.0.0.1:19102 \
        [--readers consumer,admin,consumer,admin] [--out bench/results/<date>-checkpoint-cycle-10000.json]

``--out`` also writes every row as JSON, with the machine's load, for ``bench/report.py``
(the scale section's 10,000-group figure).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import resource
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sparkmirror.checkpoints.emitter import CheckpointEmitter
from sparkmirror.config import load_config
from sparkmirror.core.checkpoints import CheckpointPass
from sparkmirror.core.offsetmap import Segment
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.kafka.groupreader import GroupReads
from sparkmirror.offsets.store import OffsetMapStore


class _ConsumerPerGroup:
    """Sends every group to the emitter's consumer path: the cycle as it was before the group reader."""

    def read(self, groups: list[str], *, timeout_s: float = 10.0) -> GroupReads:
        return GroupReads(failed=dict.fromkeys(groups, "consumer per group"))

    def close(self) -> None:
        pass


class _Timed(CheckpointEmitter):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.times: dict[str, float] = {}

    def source_groups(self) -> list[str]:
        t0 = time.monotonic()
        groups = [g for g in super().source_groups() if g.startswith(PREFIX)]
        self.times["list groups"] = time.monotonic() - t0
        return groups

    def group_positions(self, side, groups, partitions):  # type: ignore[no-untyped-def]
        t0 = time.monotonic()
        out = super().group_positions(side, groups, partitions)
        self.times["read offsets"] = time.monotonic() - t0
        return out

    def _write(self, checkpoints):  # type: ignore[no-untyped-def]
        t0 = time.monotonic()
        super()._write(checkpoints)
        self.times["write"] = time.monotonic() - t0


def _cpu(emitter: CheckpointEmitter) -> float:
    """CPU seconds of this process and of the emitter's group offset reader child, if any."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    total = usage.ru_utime + usage.ru_stime
    reader = emitter._readers.get("source")
    proc = getattr(reader, "_proc", None)
    if proc is not None and proc.poll() is None:
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


PREFIX = f"cycle-{uuid.uuid4().hex[:6]}-"


def _commit(source: str, groups: dict[str, dict[tuple[str, int], int]]) -> None:
    from sparkmirror.kafka.groups import commit_offsets

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda item: commit_offsets({"bootstrap.servers": source}, *item), groups.items()))


ROWS: list[dict[str, object]] = []


def _one_pass(emitter: _Timed, reader: str, mirrored: dict[str, int], name: str) -> None:
    emitter.times = {}
    cpu0 = _cpu(emitter)
    t = time.monotonic()
    sliced: dict[str, float] = {}
    if reader.endswith("-sliced"):
        # As the flow's chore reads a pass: slice after slice (here back to back, without the wait
        # that spreads them over the interval); a slice is what the driver's other chores wait for.
        plan = CheckpointPass(emitter.begin_pass(), 5.0, t)
        times = dict(emitter.times)  # listing the groups
        while not plan.done:
            emitter.times = {}
            t_slice = time.monotonic()
            plan.slice_done(0.0, emitter.emit_groups(mirrored, plan.next_slice()))
            plan.longest_s = max(plan.longest_s, time.monotonic() - t_slice)
            for k, v in emitter.times.items():
                times[k] = times.get(k, 0.0) + v
        emitter.times, written = times, plan.written
        sliced = {"slices": plan.slices, "longest_slice_s": round(plan.longest_s, 3)}
    else:
        written = emitter.emit(mirrored)
    total = time.monotonic() - t
    row = {
        "reader": reader,
        "pass": name,
        "checkpoints": written,
        "total_s": round(total, 3),
        **{k: round(v, 3) for k, v in emitter.times.items()},
        "translate and decide": round(total - sum(emitter.times.values()), 3),
        "cpu_s": round(_cpu(emitter) - cpu0, 2),
        **sliced,
    }
    print(json.dumps(row), flush=True)
    ROWS.append(row)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=5)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--moved", type=float, default=0.1, help="share of groups that commit again before pass 3")
    parser.add_argument(
        "--readers",
        default="consumer,admin",
        help="comma-separated, each of admin|admin-sliced|consumer, run one after the other",
    )
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--out", type=Path, help="also write the rows here as JSON")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    rng = random.Random(args.seed)

    from confluent_kafka.admin import AdminClient, NewTopic

    topics = [f"{PREFIX}t{i:03d}" for i in range(args.topics)]
    admin = AdminClient({"bootstrap.servers": args.source})
    t0 = time.monotonic()
    futures = admin.create_topics([NewTopic(t, args.partitions, 1) for t in topics], operation_timeout=60)
    for f in futures.values():
        f.result()
    groups: dict[str, dict[tuple[str, int], int]] = {}
    for i in range(args.groups):
        topic = rng.choice(topics)
        parts = rng.sample(range(args.partitions), k=min(args.partitions, rng.randint(1, 3)))
        groups[f"{PREFIX}g{i:05d}"] = {(topic, p): rng.randrange(1, 100_000) for p in parts}
    _commit(args.source, groups)
    setup_s = time.monotonic() - t0

    with tempfile.TemporaryDirectory() as tmp:
        props = Path(tmp) / "mm2.properties"
        props.write_text(
            f"clusters = A, B\nA.bootstrap.servers = {args.source}\nB.bootstrap.servers = {args.target}\n"
            f"A->B.enabled = true\nreplication.factor = 1\ncheckpoints.topic.replication.factor = 1\n"
        )
        flow = load_config(props).flows[0]
    clients = FlowClients(flow)
    store = OffsetMapStore(clients)
    store.map.mark_loaded()
    store.apply([Segment(t, p, 0, 0, 1_000_000) for t in topics for p in range(args.partitions)])
    mirrored = dict.fromkeys(topics, args.partitions)
    print(
        json.dumps(
            {"topics": args.topics, "partitions": args.partitions, "groups": args.groups, "setup_s": round(setup_s, 1)}
        ),
        flush=True,
    )
    for reader in args.readers.split(","):
        emitter = _Timed(clients, store)
        emitter.ensure_topic()
        emitter.state.restore([])  # every reader starts from no checkpoints
        if reader == "consumer":
            emitter._readers["source"] = _ConsumerPerGroup()  # type: ignore[assignment]

        _one_pass(emitter, reader, mirrored, "first (all new)")
        _one_pass(emitter, reader, mirrored, "nothing moved")
        moved = rng.sample(sorted(groups), k=int(len(groups) * args.moved))
        _commit(args.source, {g: {tp: o + 100 for tp, o in groups[g].items()} for g in moved})
        for g in moved:
            groups[g] = {tp: o + 100 for tp, o in groups[g].items()}
        _one_pass(emitter, reader, mirrored, f"{len(moved)} groups moved")
        emitter.close()
    clients.close()
    if args.out is not None:
        import datetime as dt

        args.out.write_text(
            json.dumps(
                {
                    "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                    "command": "bench/checkpoint_cycle.py " + " ".join(sys.argv[1:]),
                    "topics": args.topics,
                    "partitions": args.partitions,
                    "groups": args.groups,
                    "group_partitions": sum(len(o) for o in groups.values()),
                    "setup_s": round(setup_s, 1),
                    "loadavg": [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]],
                    "rows": ROWS,
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
