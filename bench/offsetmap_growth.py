"""What the offset map costs as it grows: per micro-batch, per checkpoint pass, in memory.

Builds, in memory, the map of ``--partitions`` partitions with ``--segments``
segments each, shaped as exactly-once writes them (each micro-batch's records
follow the previous transaction's commit marker, so every batch starts a
segment), then times:

- ``tails``: what every micro-batch asks of the store (the last segment of
  every partition), the old way (sort each partition's history, take the
  highest downstream start) and through ``PartitionMap.last_written``;
- a checkpoint pass's translations (one per partition): alone, after a batch
  extended every partition's last segment (at-least-once: the views are
  rebuilt), and after a batch added a segment to every partition
  (exactly-once: folded into the views in place);
- the memory per segment (tracemalloc).

    .venv/bin/python bench/offsetmap_growth.py --partitions 1000 --segments 100
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc

from sparkmirror.core.offsetmap import OffsetMap, Segment


def _best(fn, repeat: int = 5) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--segments", type=int, default=100, help="segments per partition (micro-batches in EOS)")
    ap.add_argument("--batch", type=int, default=50, help="records per segment")
    args = ap.parse_args()

    tracemalloc.start()
    m = OffsetMap(loaded=True)
    keys = [(f"topic-{p // 5:03d}", p % 5) for p in range(args.partitions)]
    for topic, p in keys:
        for i in range(args.segments):
            m.add(Segment(topic, p, i * args.batch, i * (args.batch + 1), args.batch))
    size, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    total = args.partitions * args.segments

    def tails_old() -> None:
        for topic, p in m.partitions():
            pm = m.partition(topic, p)
            segs = pm.segments() if pm is not None else []
            if segs:
                max(segs, key=lambda s: s.downstream_start)

    def tails_new() -> None:
        for topic, p in m.partitions():
            pm = m.partition(topic, p)
            if pm is not None:
                pm.last_written()

    def translate_all() -> None:
        for topic, p in keys:
            m.translate(topic, p, (args.segments // 2) * args.batch + 1)

    def extend_then_translate() -> None:
        """At-least-once: a batch extends every partition's last segment (the views are rebuilt)."""
        for topic, p in keys:
            pm = m.partition(topic, p)
            assert pm is not None
            last = pm.last_written()
            assert last is not None
            m.add(Segment(topic, p, last.upstream_start, last.downstream_start, last.count + 1))
        translate_all()

    def append_then_translate() -> None:
        """Exactly-once: a batch adds a segment per partition past the commit marker (folded in place)."""
        for topic, p in keys:
            pm = m.partition(topic, p)
            assert pm is not None
            last = pm.last_written()
            assert last is not None
            m.add(Segment(topic, p, last.upstream_end, last.downstream_end + 1, args.batch))
        translate_all()

    print(
        json.dumps(
            {
                "partitions": args.partitions,
                "segments": total,
                "memory_mb": round(size / 1e6, 1),
                "bytes_per_segment": round(size / total),
                "tails_per_batch_old_ms": round(_best(tails_old) * 1000, 1),
                "tails_per_batch_new_ms": round(_best(tails_new) * 1000, 1),
                "translate_every_partition_ms": round(_best(translate_all) * 1000, 1),
                "alo_extend_then_translate_ms": round(_best(extend_then_translate, 3) * 1000, 1),
                "eos_append_then_translate_ms": round(_best(append_then_translate, 3) * 1000, 1),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
