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

``--bootstrap HOST:PORT`` measures the map on a real broker instead: the
segments are written as exactly-once writes them (``OffsetSegment`` records
of a compacted topic, one per partition per batch) and loaded back by
``sparkmirror.offsets.store.read_offset_map``, the loader a run uses at start
(best of ``--loads``). From the measured load rate it projects a day and a
week of exactly-once traffic at ``--partitions`` busy partitions and one
micro-batch every ``--batch-seconds`` (each batch adds a segment per
partition: its commit marker takes a downstream offset), and writes the
figures to ``--out``:

    .venv/bin/python bench/offsetmap_growth.py --bootstrap 127.0.0.1:28910 --partitions 1000 --segments 1000 \
        --out bench/results/<date>-offsetmap.json

``--chains`` writes the map as the driver's fold leaves it instead: per partition,
``--hours`` of one-a-``--batch-seconds`` batches as closed chains of
``CHAIN_MAX_BATCHES`` batches, the open chain, and ``--open-segments`` segments
not folded yet (what accumulates between two folds), all as ``OffsetChain`` and
``OffsetSegment`` records; it is loaded by the same loader, checked by translating
every partition's first, middle and last offsets, and the load rate per
batch projects a week:

    .venv/bin/python bench/offsetmap_growth.py --bootstrap 127.0.0.1:28910 --partitions 1000 --chains --hours 24 \
        --out bench/results/<date>-offsetmap-chains-day.json

``--fold-cost`` needs no broker: it builds ``--hours`` of that history in memory and
times ``--folds`` runs of the driver's fold chore (``OffsetMapStore.fold``'s steps)
after 10 new segments a partition, in seconds of CPU, and what the micro-batch and
the translations right after a fold cost:

    .venv/bin/python bench/offsetmap_growth.py --partitions 1000 --fold-cost --hours 24
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import tracemalloc
from array import array
from typing import Any

from sparkmirror.core.offsetmap import CHAIN_MAX_BATCHES, Chain, OffsetMap, Segment


def _best(fn, repeat: int = 5) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _history(batches: int, batch: int) -> list[tuple[int, array]]:
    """``batches`` exactly-once batches of ``batch`` records (one after the other, each past the
    commit marker of the one before) as the fold leaves them: ``(k, ends)`` per chain, full chains of
    ``CHAIN_MAX_BATCHES`` batches (sharing one ``ends``) and then the open one, k its first batch
    (:func:`_chain`)."""
    full = array("i", range(batch, batch * CHAIN_MAX_BATCHES + 1, batch))
    out = []
    for k in range(0, batches, CHAIN_MAX_BATCHES):
        n = min(CHAIN_MAX_BATCHES, batches - k)
        out.append((k, full if n == CHAIN_MAX_BATCHES else array("i", full[:n])))
    return out


def _chain(topic: str, partition: int, k: int, ends: array, batch: int) -> Chain:
    """The chain of :func:`_history` starting at batch ``k``."""
    return Chain(topic, partition, k * batch, k * batch, k * (batch + 1), 1, ends)


def _segment(topic: str, partition: int, i: int, batch: int) -> Segment:
    """Batch ``i`` of :func:`_history` as the writer reports it."""
    return Segment(topic, partition, i * batch, i * (batch + 1), batch)


def _fresh_map_topic(bootstrap: str) -> tuple[Any, str, Any]:
    """A throwaway flow (a new source alias) and its offset-map topic, created on ``bootstrap`` as
    the store lays it out: one partition, compacted (kafka.internal.ensure_topic). Returns the flow,
    the topic and the admin client that created it (to delete it)."""
    import tempfile
    import uuid
    from pathlib import Path

    from confluent_kafka.admin import AdminClient, NewTopic

    from sparkmirror.config import load_config
    from sparkmirror.core.naming import offset_map_topic

    alias = f"om{uuid.uuid4().hex[:6]}"
    with tempfile.TemporaryDirectory() as tmp:
        props = Path(tmp) / "mm2.properties"
        props.write_text(
            f"clusters = {alias}, B\n{alias}.bootstrap.servers = {bootstrap}\nB.bootstrap.servers = {bootstrap}\n"
            f"{alias}->B.enabled = true\n"
        )
        flow = load_config(props).flows[0]
    topic = offset_map_topic(flow.source)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})])[topic].result()
    return flow, topic, admin


def on_broker(bootstrap: str, partitions: int, segments: int, batch: int, loads: int, batch_s: float) -> dict:  # type: ignore[type-arg]
    """Write ``partitions`` x ``segments`` offset-map records to a fresh topic; time the real loader."""
    from confluent_kafka import Producer

    from sparkmirror.offsets.store import read_offset_map

    flow, topic, admin = _fresh_map_topic(bootstrap)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 1_000_000, "acks": "all"})  # fmt: skip
    now_ms = int(time.time() * 1000)
    t0 = time.perf_counter()
    nbytes = 0
    for i in range(segments):  # batch by batch, as the stream writes them
        for p in range(partitions):
            rec = Segment(f"topic-{p // 5:03d}", p % 5, i * batch, i * (batch + 1), batch).to_record(now_ms)
            key, value = rec.key_bytes(), rec.value_bytes()
            nbytes += len(key) + len(value)
            while True:
                try:
                    producer.produce(topic, value=value, key=key)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.poll(0)
    producer.flush(300)
    write_s = time.perf_counter() - t0
    times, cpu = [], []
    for _ in range(loads):
        t0, c0 = time.perf_counter(), time.process_time()
        loaded = read_offset_map({"bootstrap.servers": bootstrap}, flow)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        assert len(loaded) == partitions * segments, len(loaded)
    admin.delete_topics([topic])
    total = partitions * segments
    best = min(times)
    rate = total / best
    per_day = partitions * 86_400 / batch_s
    return {
        "mode": "broker",
        "partitions": partitions,
        "segments_per_partition": segments,
        "segments": total,
        "record_bytes": nbytes,
        "bytes_per_segment": round(nbytes / total, 1),
        "write_s": round(write_s, 2),
        "load_s": [round(t, 2) for t in times],
        # CPU of this process (the decoding and the map, librdkafka's threads): steadier than wall
        # time on a shared machine.
        "load_cpu_s": [round(t, 2) for t in cpu],
        "load_segments_per_s": round(rate),
        "projection": {
            "batch_seconds": batch_s,
            "segments_per_day": round(per_day),
            "day_record_mb": round(per_day * nbytes / total / 1e6, 1),
            "day_load_s": round(per_day / rate, 1),
            "week_segments": round(per_day * 7),
            "week_record_mb": round(per_day * 7 * nbytes / total / 1e6, 1),
            "week_load_s": round(per_day * 7 / rate, 1),
            # The same from the loader's CPU per segment: what an idle machine could approach.
            "day_load_cpu_s": round(per_day * min(cpu) / total, 1),
        },
    }


def chains_on_broker(
    bootstrap: str, partitions: int, hours: float, batch: int, loads: int, batch_s: float, open_segments: int
) -> dict:  # type: ignore[type-arg]
    """A map of ``hours`` of exactly-once batches shaped as the fold leaves it; time the real loader."""
    import resource

    from confluent_kafka import Producer

    from sparkmirror.offsets.store import read_offset_map

    flow, topic, admin = _fresh_map_topic(bootstrap)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000,
                         "queue.buffering.max.kbytes": 512_000, "acks": "all"})  # fmt: skip
    batches = int(hours * 3600 / batch_s)  # per partition, chained
    now_ms = int(time.time() * 1000)
    t0 = time.perf_counter()
    nbytes = nrecords = 0

    def send(key: bytes, value: bytes) -> None:
        nonlocal nbytes, nrecords
        nbytes += len(key) + len(value)
        nrecords += 1
        while True:
            try:
                producer.produce(topic, value=value, key=key)
                return
            except BufferError:
                producer.poll(0.05)

    # Chain by chain across the partitions, as time passes.
    for k, ends in _history(batches, batch):
        for p in range(partitions):
            rec = _chain(f"topic-{p // 5:03d}", p % 5, k, ends, batch).to_record(now_ms)
            send(rec.key_bytes(), rec.value_bytes())
        producer.poll(0)
    for i in range(batches, batches + open_segments):
        for p in range(partitions):
            rec = _segment(f"topic-{p // 5:03d}", p % 5, i, batch).to_record(now_ms)
            send(rec.key_bytes(), rec.value_bytes())
    producer.flush(600)
    write_s = time.perf_counter() - t0
    total = partitions * (batches + open_segments)
    times, cpu = [], []
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(loads):
        t0, c0 = time.perf_counter(), time.process_time()
        loaded = read_offset_map({"bootstrap.servers": bootstrap}, flow)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        assert len(loaded) == total, (len(loaded), total)
        t0 = time.perf_counter()
        end_u = (batches + open_segments) * batch
        for p in range(partitions):
            tp = (f"topic-{p // 5:03d}", p % 5)
            for g in (0, end_u // 2 + 7, end_u - 1):
                d = loaded.translate(*tp, g).downstream_offset
                assert d == (g // batch) * (batch + 1) + g % batch, (tp, g, d)
        first_translations_s = time.perf_counter() - t0
        del loaded
    rss_peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    admin.delete_topics([topic])
    best = min(times)
    per_day = partitions * 86_400 / batch_s
    return {
        "mode": "broker-chains",
        "partitions": partitions,
        "hours": hours,
        "chain_max_batches": CHAIN_MAX_BATCHES,
        "batches": total,
        "open_segments_per_partition": open_segments,
        "records": nrecords,
        "record_bytes": nbytes,
        "bytes_per_batch": round(nbytes / total, 2),
        "write_s": round(write_s, 2),
        "load_s": [round(t, 2) for t in times],
        "load_cpu_s": [round(t, 2) for t in cpu],
        "load_batches_per_s": round(total / best),
        "first_translations_3_per_partition_s": round(first_translations_s, 2),
        "rss_peak_mb": round(rss_peak_mb),
        "rss_before_loads_mb": round(rss_before / 1024),
        "projection": {
            "batch_seconds": batch_s,
            "batches_per_day": round(per_day),
            "day_record_mb": round(per_day * nbytes / total / 1e6, 1),
            "day_load_s": round(per_day / (total / best), 1),
            "week_record_mb": round(per_day * 7 * nbytes / total / 1e6, 1),
            "week_load_s": round(per_day * 7 / (total / best), 1),
            "day_load_cpu_s": round(per_day * min(cpu) / total, 1),
        },
    }


def fold_cost(
    partitions: int, hours: float, batch: int, batch_s: float, folds: int, open_batches: int
) -> dict[str, Any]:
    """In memory: the driver's fold chore with ``hours`` of history a partition as the fold leaves it
    (:func:`_history`; the full chains of ``hours``, then an open chain of ``open_batches``),
    ``folds`` times: 10 new segments a partition (a 10 s fold interval at a batch a second), then the
    steps of ``OffsetMapStore.fold`` (plan, hold the chains, let go of the segments), then what comes
    right after it: the next micro-batch's last segment of every partition (``OffsetMapStore.tails``)
    and a translation per partition. Seconds of this process's CPU.

    The open chain is fixed rather than what ``hours`` leaves over because a fold copies it to grow
    it: its length, 0 to ``CHAIN_MAX_BATCHES``, would otherwise blur a comparison across histories."""
    m = OffsetMap(loaded=True)
    batches = int(hours * 3600 / batch_s) // CHAIN_MAX_BATCHES * CHAIN_MAX_BATCHES + open_batches
    history = _history(batches, batch)
    for p in range(partitions):
        for k, ends in history:
            m.add_chain(_chain("t", p, k, ends, batch))
    out: dict[str, list[float]] = {"fold_cpu_s": [], "tails_after_cpu_s": [], "translate_after_cpu_s": []}
    folded: list[int] = []
    n0 = batches
    for _ in range(folds):
        for i in range(n0, n0 + 10):
            for p in range(partitions):
                m.add(_segment("t", p, i, batch))
        n0 += 10
        c0 = time.process_time()
        planned = m.fold(apply=False)
        for f in planned:
            m.apply_fold(f, chain_only=True)
        for f in planned:
            m.apply_fold(f)
        out["fold_cpu_s"].append(time.process_time() - c0)
        folded.append(sum(len(f.replaced) for f in planned))
        c0 = time.process_time()
        for p in range(partitions):
            pm = m.partition("t", p)
            assert pm is not None and pm.last_written() == _segment("t", p, n0 - 1, batch)
        out["tails_after_cpu_s"].append(time.process_time() - c0)
        c0 = time.process_time()
        for p in range(partitions):
            m.translate("t", p, 5)
        out["translate_after_cpu_s"].append(time.process_time() - c0)
    return {
        "partitions": partitions,
        "hours": hours,
        "batches_per_partition": batches,
        "chains_per_partition": len(history),
        "open_chain_batches": open_batches,
        "segments_folded": folded,
        **{k: [round(t, 3) for t in v] for k, v in out.items()},
        **{k[:-2] + "_median_s": round(statistics.median(v), 3) for k, v in out.items()},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--segments", type=int, default=100, help="segments per partition (micro-batches in EOS)")
    ap.add_argument("--batch", type=int, default=50, help="records per segment")
    ap.add_argument("--bootstrap", help="measure on this broker (write, then load with the store's loader)")
    ap.add_argument("--loads", type=int, default=3, help="loads timed on the broker (best reported)")
    ap.add_argument("--batch-seconds", type=float, default=1.0, help="micro-batch period for the projection")
    ap.add_argument("--out", help="write the broker figures here as JSON")
    ap.add_argument("--label", default="", help="what code was measured (kept in the JSON)")
    ap.add_argument("--chains", action="store_true", help="write the map as folded chains (with --bootstrap)")
    ap.add_argument("--hours", type=float, default=24.0, help="hours of batches to write as chains")
    ap.add_argument("--open-segments", type=int, default=10, help="segments per partition not folded yet")
    ap.add_argument("--fold-cost", action="store_true", help="time the driver's fold in memory (with --hours)")
    ap.add_argument("--folds", type=int, default=5, help="folds timed with --fold-cost")
    ap.add_argument(
        "--open-batches", type=int, default=CHAIN_MAX_BATCHES // 2, help="batches of the open chain with --fold-cost"
    )
    args = ap.parse_args()
    if args.bootstrap:
        import datetime as dt
        import sys
        from pathlib import Path

        if args.chains:
            figures = chains_on_broker(
                args.bootstrap, args.partitions, args.hours, args.batch, args.loads, args.batch_seconds,
                args.open_segments,
            )  # fmt: skip
        else:
            figures = on_broker(
                args.bootstrap, args.partitions, args.segments, args.batch, args.loads, args.batch_seconds
            )
        figures = {
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "command": "bench/offsetmap_growth.py " + " ".join(sys.argv[1:]),
            "loadavg": [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]],
            "label": args.label,
            "sparkmirror_module": __import__("sparkmirror").__file__,
            **figures,
        }
        print(json.dumps(figures))
        if args.out:
            Path(args.out).write_text(json.dumps(figures, indent=2) + "\n")
        return 0

    if args.fold_cost:
        figures = fold_cost(args.partitions, args.hours, args.batch, args.batch_seconds, args.folds, args.open_batches)
        print(json.dumps({"sparkmirror_module": __import__("sparkmirror").__file__, **figures}))
        return 0
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
