"""BENCHMARKS.md and its chart, generated from a result of ``bench/run.py``.

    .venv/bin/python bench/report.py [bench/results/<date>.json]

Without an argument, the newest ``bench/results/YYYY-MM-DD.json`` is used. The
report only formats what the JSON holds; it never computes a figure that the
run did not measure, except the ratios the targets are stated in.

The scale scenario's section (issue 16) comes from the newest
``bench/results/YYYY-MM-DD-scale[-N].json`` (or the one given), with its chart
of throughput against partitions, and its targets; two figures of those
targets come from their own scripts' results: the checkpoint pass at 10,000
groups (``*-checkpoint-cycle-10000.json``, ``bench/checkpoint_cycle.py --out``)
and the offset map's size and load time (``*-offsetmap.json``,
``bench/offsetmap_growth.py --bootstrap --out``).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
RESULTS = BENCH / "results"
OUTPUT = REPO / "BENCHMARKS.md"
SYSTEMS = ("limit", "mm2", "sparkmirror_at_least_once", "sparkmirror_exactly_once")
LABELS = {
    "limit": "limit (JVM copy loop)",
    "mm2": "MirrorMaker 2",
    "sparkmirror_at_least_once": "sparkmirror at-least-once",
    "sparkmirror_exactly_once": "sparkmirror exactly-once",
}
#: The latency target is stated for this offered rate.
TARGET_RATE = 20_000
TARGET_P99_MS = 1500
#: Issue 16's targets.
SCALE_PARTITIONS = 1000
SCALE_DRIVER_RSS_MB = 2048
SCALE_FRESHNESS_SLACK_S = 5
SCALE_DAY_LOAD_S = 10
SCALE_RESULT = re.compile(r"(\d{4}-\d{2}-\d{2})-scale(?:-(\d+))?\.json")
#: What exactly once's latency figures are: B's append, which comes before the commit that a
#: ``read_committed`` consumer waits for (docs/performance.md, "What a read_committed consumer waits").
APPEND_NOT_COMMIT = (
    "Exactly once, a latency is the record's append on B, as for the other systems; a `read_committed` consumer "
    "sees the record only at its transaction's commit, later (docs/performance.md, \"What a read_committed "
    'consumer waits").'
)
APPEND_NOT_COMMIT_SHORT = (
    "exactly once, B's append: a read_committed consumer sees the record at its transaction's commit, later "
    "(docs/performance.md)"
)
#: Issue 27's targets: the streaming engine against MM2 and the limit loop on the same brokers.
LIMIT_P99_FACTOR = 2.0
#: Runs of the commit-interval trade-off (``--sparkmirror-prop sparkmirror.commit.interval.ms=T``).
COMMIT_RESULT = re.compile(r"\d{4}-\d{2}-\d{2}-streaming-commit-(\d+)-ms\.json")


def _figure(result: dict[str, Any], system: str, key: str) -> float | None:
    value = result["systems"].get(system, {}).get(key)
    return None if value is None else float(value)


def _ratio(result: dict[str, Any], a: str, b: str, key: str = "records_per_s") -> float | None:
    x, y = _figure(result, a, key), _figure(result, b, key)
    return None if x is None or not y else x / y


def check_targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 6's targets against the medians of this result; ``passed`` is None when a figure is missing."""
    alo, eos = "sparkmirror_at_least_once", "sparkmirror_exactly_once"
    rate = result["settings"]["rate"]
    rows: list[dict[str, Any]] = []

    def add(target: str, measured: float | None, threshold: float, *, at_most: bool = False, unit: str = "") -> None:
        passed = None if measured is None else (measured <= threshold if at_most else measured >= threshold)
        rows.append({"target": target, "measured": measured, "threshold": threshold, "at_most": at_most,
                     "unit": unit, "passed": passed})  # fmt: skip

    add("sparkmirror at-least-once throughput / MirrorMaker 2", _ratio(result, alo, "mm2"), 1.25, unit="x")
    add("sparkmirror at-least-once throughput / limit", _ratio(result, alo, "limit"), 0.60, unit="x")
    add("sparkmirror exactly-once throughput / MirrorMaker 2 (at-least-once)", _ratio(result, eos, "mm2"), 1.0,
        unit="x")  # fmt: skip
    for system in (alo, eos):
        note = "" if rate == TARGET_RATE else f" (measured at {rate:,} records/s, target stated for {TARGET_RATE:,})"
        add(f"{LABELS[system]} p99 latency at {TARGET_RATE:,} records/s{note}",
            _figure(result, system, "latency_p99_ms"), TARGET_P99_MS, at_most=True, unit=" ms")  # fmt: skip
        add(f"{LABELS[system]} records re-read after failover", _figure(result, system, "reread_after_failover"), 0,
            at_most=True)  # fmt: skip
    for system in SYSTEMS:
        if system in result["systems"]:
            add(f"{LABELS[system]}: no record lost", float(result["systems"][system]["lost"]), 0, at_most=True)
    return rows


def commit_interval_ms(result: dict[str, Any], system: str = "sparkmirror_exactly_once") -> int:
    """The commit interval ``system`` ran with (``--sparkmirror-prop``, else its mode's default)."""
    for prop in result["settings"].get("sparkmirror_props", []):
        key, _, value = prop.partition("=")
        if key.strip() == "sparkmirror.commit.interval.ms":
            return int(value)
    # A run says each mode's default; one from before it did ran both at 200 ms.
    return int(result["settings"].get("commit_interval_ms_default", {}).get(system, 200))


#: Said where a sparkmirror latency phase's CPU is left out: measured before bench/proctree.py counted the
#: Python workers (PySpark's worker daemon ignores SIGCHLD, so the kernel reaped them uncounted).
WORKERS_UNCOUNTED = (
    "–: not counted, the run's CPU figure left out sparkmirror's Python workers (runs before the count was "
    'fixed on 2026-12-02; docs/performance.md, "The benchmark\'s CPU count missed the Python workers")'
)


def phase_cpu_s(system: str, phase: dict[str, Any]) -> float | None:
    """A phase's whole process tree CPU seconds, or None where unknown: sparkmirror's from a run whose count
    left out its Python workers (no ``cpu_s_auto_reaped`` in it) are not its CPU."""
    cpu = phase.get("cpu_s_total")
    if cpu is None or (system.startswith("sparkmirror") and phase.get("cpu_s_auto_reaped") is None):
        return None
    return float(cpu)


def latency_cpu_s(result: dict[str, Any], system: str) -> float | None:
    """The median over runs of the whole process tree's CPU seconds in the latency phase."""
    return _median_latency_cpu_s(result["systems"].get(system, {}).get("per_run", []), system)


def _median_latency_cpu_s(runs: list[dict[str, Any]], system: str) -> float | None:
    """The median over ``runs`` (each a run's result) of their latency phase's CPU seconds."""
    values = [cpu for r in runs if (cpu := phase_cpu_s(system, r.get("latency") or {})) is not None]
    return statistics.median(values) if values else None


def streaming_targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 27's targets at 8 partitions, each a comparison within this one result (same brokers, same run):
    the measured figure against a threshold that is another system's figure (times a factor, plus a constant)."""
    alo, eos = "sparkmirror_at_least_once", "sparkmirror_exactly_once"
    rows: list[dict[str, Any]] = []

    def add(target: str, measured: float | None, threshold: float | None, unit: str) -> None:
        passed = None if measured is None or threshold is None else measured <= threshold
        rows.append({"target": target, "measured": measured, "threshold": threshold, "at_most": True,
                     "unit": unit, "passed": passed})  # fmt: skip

    def p(system: str, q: str) -> float | None:
        return _figure(result, system, f"latency_{q}_ms")

    mm2_p99, limit_p99 = p("mm2", "p99"), p("limit", "p99")
    interval = commit_interval_ms(result)
    add("at-least-once latency p50, at most MirrorMaker 2's", p(alo, "p50"), p("mm2", "p50"), " ms")
    add("at-least-once latency p99, at most MirrorMaker 2's", p(alo, "p99"), mm2_p99, " ms")
    add(f"at-least-once latency p99, at most {LIMIT_P99_FACTOR:g}x the limit loop's", p(alo, "p99"),
        None if limit_p99 is None else LIMIT_P99_FACTOR * limit_p99, " ms")  # fmt: skip
    add(f"exactly-once latency p99, at most the commit interval ({interval} ms) plus MirrorMaker 2's p99",
        p(eos, "p99"), None if mm2_p99 is None else interval + mm2_p99, " ms")  # fmt: skip
    for system in (alo, eos):
        add(f"{LABELS[system]}: CPU seconds of the latency phase, at most MirrorMaker 2's",
            latency_cpu_s(result, system), latency_cpu_s(result, "mm2"), " s")  # fmt: skip
    return rows


def _median_latency(system: dict[str, Any], quantile: str) -> float | None:
    """The median over a system's runs of one latency quantile (``p99_ms``, ...)."""
    runs = system.get("per_run", [])
    values = [float(r["latency"][quantile]) for r in runs if (r.get("latency") or {}).get(quantile)]
    return statistics.median(values) if values else None


def commit_tradeoff(result: dict[str, Any], json_path: Path) -> list[str]:
    """The commit interval's trade-off: this result's row and every ``*-streaming-commit-T-ms.json`` run."""
    systems = ("sparkmirror_at_least_once", "sparkmirror_exactly_once")
    results = [(result, json_path)]
    for path in sorted(RESULTS.glob("*-streaming-commit-*-ms.json"), reverse=True):
        if COMMIT_RESULT.fullmatch(path.name) is not None:
            results.append((json.loads(path.read_text()), path))
    # Each (interval, mode) once: this result's, else the newest run's. Unset, the interval is each mode's
    # own default.
    runs: dict[tuple[int, str], tuple[dict[str, Any], Path]] = {}
    for r, path in results:
        for system in systems:
            if r["systems"].get(system):
                runs.setdefault((commit_interval_ms(r, system), system), (r, path))
    if len({interval for interval, _system in runs}) < 2:
        return []
    lines = [
        "| commit interval | system | records/s | latency p50 / p90 / p99 / p99.9 ms | latency phase CPU s | code "
        "| result |",
        "|--:|---|--:|--:|--:|---|---|",
    ]
    for (interval, system), (r, path) in sorted(runs.items()):
        s = r["systems"][system]
        quantiles = " / ".join(_num(_median_latency(s, q)) for q in ("p50_ms", "p90_ms", "p99_ms", "p999_ms"))
        rel = path.relative_to(REPO)
        lines.append(
            f"| {interval:,} ms | {LABELS[system]} | {_num(s.get('records_per_s'))} | {quantiles} "
            f"| {_num(latency_cpu_s(r, system), 1)} | {_commit(r)} | [{path.name}]({rel}) |"
        )
    if any(_workers_uncounted(r, system) for (_i, system), (r, _p) in runs.items()):
        lines += ["", WORKERS_UNCOUNTED + "."]
    return lines


def _workers_uncounted(result: dict[str, Any], system: str) -> bool:
    """Whether a sparkmirror system's latency CPU in ``result`` (a ``make bench`` result) is left out for
    want of its workers'."""
    return any(
        (r.get("latency") or {}).get("cpu_s_total") is not None and phase_cpu_s(system, r["latency"]) is None
        for r in result["systems"].get(system, {}).get("per_run", [])
    )


# -- formatting -----------------------------------------------------------------


def _writer_text(settings: dict[str, Any]) -> str:
    """Which writer sparkmirror's runs used, when not the default (exactly-once wrote from Python
    before the JVM writer had transactions: results without ``exactly_once_writer``)."""
    writer = settings.get("writer", "python")
    if writer == "python":
        return ""
    if settings.get("exactly_once_writer", "python") == writer:
        return f", `sparkmirror.writer = {writer}` (both modes)"
    return f", at-least-once writer `sparkmirror.writer = {writer}` (exactly-once from Python)"


def _num(value: Any, digits: int = 0) -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and digits:
        return f"{value:,.{digits}f}"
    return f"{value:,.0f}"


def _measured(row: dict[str, Any]) -> str:
    m = row["measured"]
    if m is None:
        return "not measured"
    return f"{m:.2f}{row['unit']}" if row["unit"] == "x" else f"{_whole_or_tenth(m)}{row['unit']}"


def _threshold(row: dict[str, Any]) -> str:
    return "–" if row["threshold"] is None else f"≤ {_whole_or_tenth(row['threshold'])}{row['unit']}"


def _whole_or_tenth(value: float) -> str:
    """A figure of a target: whole, or to a tenth where it is not whole (a median of two runs may end in
    .5, and "16 ms ≤ 16 ms: FAIL" would hide the half that failed it)."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _verdict(passed: bool | None) -> str:
    return "**n/a**" if passed is None else ("PASS" if passed else "**FAIL**")


def results_table(result: dict[str, Any]) -> list[str]:
    lines = [
        "| system | records/s | MB/s | CPU s (start to last record) | CPU s (first to last record) | peak RSS MB "
        "| latency p50 ms | latency p99 ms | re-read after failover | skipped | lost |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for name in SYSTEMS:
        s = result["systems"].get(name)
        if s is None:
            continue
        status = " (FAILED)" if s["failed"] else ""
        lines.append(
            f"| {LABELS[name]}{status} | {_num(s['records_per_s'])} | {_num(s['mb_per_s'], 1)} "
            f"| {_num(s['cpu_s'], 1)} | {_num(s['cpu_s_transfer'], 1)} | {_num(s['peak_rss_mb'])} "
            f"| {_num(s['latency_p50_ms'])} | {_num(s['latency_p99_ms'])} "
            f"| {_num(s['reread_after_failover'])} | {_num(s['skipped_after_failover'])} | {_num(s['lost'])} |"
        )
    return lines


def spread_table(result: dict[str, Any]) -> list[str]:
    keys = (("records_per_s", "records/s", 0), ("cpu_s_transfer", "CPU s (transfer)", 1),
            ("latency_p99_ms", "p99 ms", 0), ("reread_after_failover", "re-read", 0))  # fmt: skip
    lines = ["| system | figure | per run | min | median | max |", "|---|---|---|--:|--:|--:|"]
    for name in SYSTEMS:
        s = result["systems"].get(name)
        if s is None:
            continue
        for key, label, digits in keys:
            sp = s["spread"].get(key, {})
            if not any(v is not None for v in sp.get("runs", [])):
                continue
            runs = ", ".join(_num(v, digits) for v in sp["runs"])
            lines.append(
                f"| {LABELS[name]} | {label} | {runs} | {_num(sp.get('min'), digits)} "
                f"| {_num(sp.get('median'), digits)} | {_num(sp.get('max'), digits)} |"
            )
    return lines


def latency_detail(result: dict[str, Any]) -> list[str]:
    lines = [
        "| system | run | offered records/s | records | p50 | p90 | p99 | p99.9 | max | CPU s | peak RSS MB |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for name in SYSTEMS:
        s = result["systems"].get(name)
        for r in (s or {}).get("per_run", []):
            lat = r.get("latency") or {}
            if not lat:
                continue
            lines.append(
                f"| {LABELS[name]} | {r['run']} | {_num(lat.get('offered_rate'))} | {_num(lat.get('samples'))} "
                f"| {_num(lat.get('p50_ms'))} | {_num(lat.get('p90_ms'))} | {_num(lat.get('p99_ms'))} "
                f"| {_num(lat.get('p999_ms'))} | {_num(lat.get('max_ms'))} | {_num(phase_cpu_s(name, lat), 1)} "
                f"| {_num(lat.get('peak_rss_mb'))} |"
            )
    if any(_workers_uncounted(result, name) for name in SYSTEMS):
        lines += ["", WORKERS_UNCOUNTED + "."]
    return lines


def failures(result: dict[str, Any]) -> list[str]:
    lines = []
    for name in SYSTEMS:
        for f in result["systems"].get(name, {}).get("failures", []):
            lines.append(f"- {LABELS[name]}: {f.splitlines()[0][:300]}")
    return lines


def chart(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    names = [n for n in SYSTEMS if n in result["systems"]]
    labels = [LABELS[n].replace(" (", "\n(").replace("sparkmirror ", "sparkmirror\n") for n in names]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    medians, low, high = [], [], []
    for n in names:
        sp = result["systems"][n]["spread"]["records_per_s"]
        med = result["systems"][n]["records_per_s"] or 0.0
        medians.append(med)
        low.append(med - sp.get("min", med) if med else 0.0)
        high.append(sp.get("max", med) - med if med else 0.0)
    bars = ax1.bar(labels, medians, yerr=[low, high], capsize=6, color=["#888888", "#d9822b", "#3c78d8", "#1c4587"])
    ax1.bar_label(bars, labels=[f"{m:,.0f}" for m in medians], padding=3, fontsize=9)
    ax1.set_ylabel("records/s (median; whiskers: min–max over runs)")
    ax1.set_title(f"Throughput, {result['settings']['records']:,} records of {result['settings']['size']} B")
    x = range(len(names))
    p50 = [result["systems"][n]["latency_p50_ms"] or 0 for n in names]
    p99 = [result["systems"][n]["latency_p99_ms"] or 0 for n in names]
    w = 0.38
    b50 = ax2.bar([i - w / 2 for i in x], p50, w, label="p50", color="#6fa8dc")
    b99 = ax2.bar([i + w / 2 for i in x], p99, w, label="p99", color="#1c4587")
    ax2.bar_label(b50, labels=[f"{v:,.0f}" for v in p50], padding=2, fontsize=8)
    ax2.bar_label(b99, labels=[f"{v:,.0f}" for v in p99], padding=2, fontsize=8)
    ax2.axhline(TARGET_P99_MS, color="#cc0000", linestyle="--", linewidth=1, label="p99 target (1.5 s)")
    ax2.set_xticks(list(x), labels)
    ax2.set_ylabel("ms (append time on B - source timestamp)")
    ax2.set_title(f"Replication latency at {result['settings']['rate']:,} records/s offered")
    ax2.legend(fontsize=8)
    for ax in (ax1, ax2):
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}"))
        ax.tick_params(axis="x", labelsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _code(result: dict[str, Any]) -> str:
    code = result.get("sparkmirror_code")
    if not code:
        return "not recorded"

    def one(state: dict[str, Any]) -> str:
        dirty = state["uncommitted_src_files"]
        return f"commit {state['commit']}" + (f" with uncommitted changes to {', '.join(dirty)}" if dirty else "")

    before, after = one(code["before"]), one(code["after"])
    text = before if before == after else f"{before} at the start, {after} at the end (the checkout is shared)"
    per_run = {
        (name, r["run"]): one(r["code_before"])
        for name, sy in result["systems"].items()
        if name.startswith("sparkmirror")
        for r in sy.get("per_run", [])
        if r.get("code_before")
    }
    if len(set(per_run.values())) > 1:
        text += "; sparkmirror's runs started at: " + ", ".join(
            f"{LABELS[name]} run {run}: {state}" for (name, run), state in sorted(per_run.items())
        )
    elif per_run:
        text += f"; every sparkmirror run started at {next(iter(per_run.values()))}"
    return text


def _commit(result: dict[str, Any]) -> str:
    """The commit the run started at (``*`` when it had uncommitted changes to src/)."""
    before = (result.get("sparkmirror_code") or {}).get("before")
    if not before:
        return "–"
    return before["commit"] + ("*" if before["uncommitted_src_files"] else "")


def _loads(samples: list[dict[str, Any]]) -> str:
    one_minute = [d["loadavg"][0] for d in samples if d.get("loadavg")]
    return f"{min(one_minute):.1f}–{max(one_minute):.1f}" if one_minute else "not recorded"


def render(result: dict[str, Any], json_path: Path, png_path: Path) -> str:
    s = result["settings"]
    m = result["machine"]
    load = result.get("machine_load", {})
    rel_json = json_path.relative_to(REPO)
    rel_png = png_path.relative_to(REPO)
    during = [
        r.get(when, {}) for sy in result["systems"].values() for r in sy.get("per_run", [])
        for when in ("load_before", "load_after")
    ]  # fmt: skip
    pytest_seen = max((d.get("pytest_processes", 0) for d in during), default=0)
    tradeoff = commit_tradeoff(result, json_path)
    lines = [
        "# Benchmarks",
        "",
        "<!-- Generated by bench/report.py from " + str(rel_json) + "; do not edit by hand. -->",
        "",
        f"sparkmirror beside Apache Kafka's MirrorMaker 2 and the machine's limit, measured by `make bench` "
        f"(`{result['command']}`) on {result['date'][:10]}: {result['runs']} run(s) per system, one system after "
        f"another on the same brokers and data (each run starting with another system). Figures are medians over "
        f"the runs; the spread is below. Raw results: [`{rel_json}`]({rel_json}).",
        "",
        f"![throughput and latency]({rel_png})",
        "",
        "## Results",
        "",
        *results_table(result),
        "",
        "## Targets (issue 6)",
        "",
        "| target | measured | threshold | |",
        "|---|--:|--:|---|",
        *[
            f"| {t['target']} | {_measured(t)} | {'≤' if t['at_most'] else '≥'} {t['threshold']}{t['unit']} "
            f"| {_verdict(t['passed'])} |"
            for t in result["targets"]
        ],
        "",
        "## Targets (issue 27): the streaming engine's latency and CPU against MirrorMaker 2 and the limit loop",
        "",
        "Latency figures are the medians over the runs of each system's latency run (below); CPU is the whole "
        "process tree's during the latency phase. Each threshold is another system's figure in this same result. "
        f"{APPEND_NOT_COMMIT}",
        "",
        "| target | measured | threshold | |",
        "|---|--:|--:|---|",
        *[
            f"| {t['target']} | {_measured(t)} | {_threshold(t)} | {_verdict(t['passed'])} |"
            for t in streaming_targets(result)
        ],
        "",
        *(
            [
                "### The commit interval's trade-off",
                "",
                "Latency quantiles are medians over a row's runs. Each mode's default interval's row is this result; "
                "the others ran once each with "
                "`--sparkmirror-prop sparkmirror.commit.interval.ms=T` and their own command, code and date, "
                "linked). At least once the interval bounds what a crash copies again; exactly once a "
                "`read_committed` reader sees a record only at its transaction's commit: later than these "
                "appends by up to an interval (more while commits take longer than one) plus the time to commit it "
                "(docs/performance.md, "
                '"What a read_committed consumer waits").',
                "",
                *tradeoff,
                "",
            ]
            if tradeoff
            else []
        ),
        "## Spread over runs",
        "",
        *spread_table(result),
        "",
        "### Latency runs",
        "",
        *latency_detail(result),
        "",
    ]
    fails = failures(result)
    if fails:
        lines += ["### Failures", "", *fails, ""]
    lines += [
        "## Machine, versions, settings",
        "",
        f"- Machine: {m['cpus']} CPUs ({m['cpu_model']}), {m['memory_gib']} GiB, {m['platform']}.",
        f"- Other load: load average {load.get('before', {}).get('loadavg')} before the run, "
        f"{load.get('after', {}).get('loadavg')} after; up to {pytest_seen} pytest processes of other work were "
        f"seen between the measurements (load averages there: {_loads(during)}). Both clusters (one broker each, "
        f"512 MiB heap, {broker_jit_text(s)}), the system under test and the harness share the machine.",
        "- Versions: " + ", ".join(f"{k} {v}" for k, v in result["versions"].items()) + ".",
        f"- sparkmirror code measured: {_code(result)}.",
        f"- Workload: {s['records']:,} records, {s['partitions']} partitions, {s['size']} B values, a 12 B key and "
        f"one header ({s['payload_bytes_per_record']} B of payload per record; MB = 10^6 payload bytes).",
        "- Producer settings, all four systems: "
        + ", ".join(f"`{k}={v}`" for k, v in s["producer"].items())
        + ". MM2 gets them as `B.producer.*` (its dedicated-mode keys), sparkmirror with the same keys, the limit "
        "loop from a properties file.",
        f"- MirrorMaker 2: dedicated mode, `tasks.max={s['tasks_max']}`, JVM `{' '.join(s['jvm']['mm2'])}`"
        + (f", extra: `{'`, `'.join(s['mm2_props'])}`" if s["mm2_props"] else "")
        + ".",
        f"- Limit loop (`bench/jvm/CopyLoop.java`): {s.get('limit_threads', 1)} copy thread(s), each with its own "
        f"consumer and producer; JVM `{' '.join(s['jvm']['limit'])}`.",
        "- sparkmirror: `sparkmirror run` with its defaults (Spark `local[*]`)"
        + (f", extra: `{'`, `'.join(s['sparkmirror_props'])}`" if s["sparkmirror_props"] else "")
        + _writer_text(s)
        + "; `--once` for the throughput phase.",
        f"- Latency phase: {s['rate']:,} records/s offered for {s['latency_seconds']} s by a paced producer after "
        f"{s['warmup_seconds']} s of warm-up the system had to mirror first.",
        f"- Checkpoint interval (MM2 and sparkmirror): {s['checkpoint_interval_s']} s; failover group positions "
        f"(seed {s['seed']}): {s['failover_group_positions']}.",
        "",
        "## How it is measured",
        "",
        "- **Throughput**: B's remote topics are created before each run with `message.timestamp.type="
        "LogAppendTime`, so every record on B carries the moment B appended it. records/s = records / (last append "
        "time - first append time): from the first record to the last record on B, start-up excluded. Every "
        "record's timestamp type is checked.",
        "- **CPU and memory**: each system runs under `bench/proctree.py`, which is the subreaper of the system's "
        "whole process tree (JVM, Spark's Python workers) and samples `/proc` every 0.25 s. *CPU s (start to last "
        "record)* includes start-up (JVM, Spark session); *CPU s (first to last record)* is the transfer only. "
        "Peak RSS is the largest sampled sum over the tree.",
        "- **No loss**: after every phase B is read back with `isolation.level=read_committed` and every key "
        "(unique per record) is checked; a run missing any record fails and gives no figure.",
        "- **Latency**: a fresh process of the system mirrors a second topic while a paced producer offers the "
        "load; latency = B's append time - the record's timestamp on A (carried in the value's first 8 bytes, "
        "since B overwrites the record timestamp). One clock: both clusters run on this machine.",
        "- **Failover**: a group committed at a random position per partition on A is translated to B by the "
        "system's own tools (MM2: its checkpoints, read with Kafka's `RemoteClusterUtils.translateOffsets`; "
        "sparkmirror: `sparkmirror offsets translate --json`). B is then read key by key: records at or after the "
        "translated offset that the group had already read are re-reads; records it had not read that lie only "
        "before it are skipped.",
        "",
        "See [bench/README.md](bench/README.md) for the command's options and "
        "[docs/performance.md](docs/performance.md) for what was tuned and profiled.",
        "",
    ]
    return "\n".join(lines)


# -- the scale scenario (issue 16) ------------------------------------------------


def _scale_figure(result: dict[str, Any], system: str, key: str) -> float | None:
    value = result["summary"].get(system, {}).get(key)
    return None if value is None else float(value)


def check_scale_targets(
    result: dict[str, Any], cycle: dict[str, Any] | None, offsetmap: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """Issue 16's targets against a scale result; ``passed`` is None when a figure is missing."""
    alo, eos, summary = "sparkmirror_at_least_once", "sparkmirror_exactly_once", result["summary"]
    parts = result["scale"]["topics"] * result["scale"]["partitions"]
    interval = result["checkpoint_interval_s"]
    rows: list[dict[str, Any]] = []

    def add(target: str, measured: float | None, threshold: float | None, *, at_most: bool = False, unit: str = "",
            note: str = "", passed: bool | None = None, extra: bool = True) -> None:  # fmt: skip
        too_short = note.startswith("window too short")
        if passed is None and measured is not None and threshold is not None and extra and not too_short:
            passed = measured <= threshold if at_most else measured >= threshold
        rows.append({"target": target, "measured": measured, "threshold": threshold, "at_most": at_most,
                     "unit": unit, "passed": passed, "note": note, "too_short": too_short})  # fmt: skip

    def ratio(a: str, b: str) -> float | None:
        x, y = _scale_figure(result, a, "records_per_s"), _scale_figure(result, b, "records_per_s")
        return None if x is None or not y else x / y

    def short(*systems: str) -> str:
        too_short = [
            f"{LABELS[n]} {summary[n]['transfer_s']:.0f} s"
            for n in systems
            if n in summary and summary[n].get("window_too_short") and summary[n].get("transfer_s") is not None
        ]
        return (
            f"window too short to quote (< {result['min_window_s']:.0f} s): {', '.join(too_short)}" if too_short else ""
        )

    at = f" at {parts:,} partitions"
    add(f"at-least-once throughput / MirrorMaker 2{at}", ratio(alo, "mm2"), 1.25, unit="x", note=short(alo, "mm2"))
    add(f"at-least-once throughput / limit{at}", ratio(alo, "limit"), 0.75, unit="x", note=short(alo, "limit"))
    add(f"exactly-once throughput / MirrorMaker 2 (at-least-once){at}", ratio(eos, "mm2"), 1.0, unit="x",
        note=short(eos, "mm2"))  # fmt: skip
    for n in (alo, eos):
        if n not in summary:
            continue
        sm = summary[n]
        groups = sm.get("freshness_groups")
        arrived = sm.get("freshness_arrived")
        complete = groups is not None and arrived == groups
        p99, bound = sm.get("freshness_p99_s"), interval + SCALE_FRESHNESS_SLACK_S
        missing = f"only {arrived or 0:,.0f} of {groups or 0:,.0f} groups got a checkpoint in the wait"
        add(f"{LABELS[n]}: checkpoint freshness p99, commit on A to checkpoint on B, {groups or 0:,.0f} groups",
            p99, bound, at_most=True, unit=" s", note="" if complete else missing,
            passed=None if p99 is None else complete and p99 <= bound)  # fmt: skip
        untranslated = sm.get("group_partitions_without_checkpoint")
        reread = sm.get("reread_after_failover")
        note = f"{untranslated:,.0f} group partitions without a checkpoint at their position (not counted)"
        ok = None if reread is None else reread == 0 and not untranslated
        add(f"{LABELS[n]}: records re-read after failover, every group", reread, 0, at_most=True,
            note=note if untranslated else "", passed=ok)  # fmt: skip
        add(f"{LABELS[n]}: driver peak RSS (sparkmirror process + Spark JVM)", sm.get("peak_rss_mb_driver"),
            SCALE_DRIVER_RSS_MB, at_most=True, unit=" MB")  # fmt: skip
    if cycle is not None:
        first = next((r for r in cycle["rows"] if r["pass"].startswith("first")), None)
        passes = [r["total_s"] for r in cycle["rows"]]
        add(f"checkpoint pass over {cycle['groups']:,} groups ({cycle['group_partitions']:,} group partitions), "
            "longest of its passes (measured; no threshold stated)", max(passes) if passes else None, None,
            unit=" s", note=f"first pass {first['total_s']:.1f} s" if first else "")  # fmt: skip
    if offsetmap is not None and offsetmap.get("mode") == "broker-chains":
        proj = offsetmap["projection"]
        loads = ", ".join(f"{x:g}" for x in offsetmap["load_s"])
        add(f"exactly-once offset map of {offsetmap['hours']:g} h at {offsetmap['partitions']:,} partitions "
            f"({offsetmap['batches']:,} batches, one every {proj['batch_seconds']:g} s, in {offsetmap['records']:,} "
            "chain records) loads in (slowest load)", max(offsetmap["load_s"]), SCALE_DAY_LOAD_S,
            at_most=True, unit=" s",
            note=f"measured on a broker (loads: {loads} s; {offsetmap['record_bytes'] / 1e6:,.0f} MB); "
            f"a week projected: {proj['week_load_s']:,.0f} s, {proj['week_record_mb']:,.0f} MB of records")  # fmt: skip
    elif offsetmap is not None:
        proj = offsetmap["projection"]
        add(f"exactly-once offset map of a day at {offsetmap['partitions']:,} partitions "
            f"({proj['segments_per_day']:,} segments, one batch every {proj['batch_seconds']:g} s) loads in",
            proj["day_load_s"], SCALE_DAY_LOAD_S, at_most=True, unit=" s",
            note=f"projected from {offsetmap['segments']:,} segments loaded at "
            f"{offsetmap['load_segments_per_s']:,} segments/s; a week: {proj['week_load_s']:,.0f} s, "
            f"{proj['week_record_mb']:,.0f} MB of records")  # fmt: skip
    # Issue 27's at this scale, each against MirrorMaker 2's figure in this same result.
    for n in (alo, eos):
        if n in summary:
            add(f"{LABELS[n]}: latency p99{at}, at most MirrorMaker 2's (issue 27)",
                _scale_figure(result, n, "latency_p99_ms"), _scale_figure(result, "mm2", "latency_p99_ms"),
                at_most=True, unit=" ms", note=APPEND_NOT_COMMIT_SHORT if n == eos else "")  # fmt: skip
            add(f"{LABELS[n]}: CPU seconds of the latency phase{at}, at most MirrorMaker 2's (issue 27)",
                _scale_latency_cpu_s(result, n), _scale_latency_cpu_s(result, "mm2"), at_most=True, unit=" s",
                note="the system's processes, from its start: not the brokers' (librdkafka sends a produce request "
                "a partition, which costs broker B more than Java's clients do: docs/performance.md)")  # fmt: skip
    for n in SYSTEMS:
        if n in summary:
            add(f"{LABELS[n]}: no record lost", float(summary[n]["lost"]), 0, at_most=True)
    return rows


def _scale_latency_cpu_s(result: dict[str, Any], system: str) -> float | None:
    """The median over a scale result's runs of the system's whole process tree's CPU seconds in its latency
    phase (a fresh process: its start, the catch-up, the warm-up and the measured load)."""
    return _median_latency_cpu_s(result["systems"].get(system, []), system)


def _scale_measured(row: dict[str, Any]) -> str:
    m = row["measured"]
    if m is None:
        return "not measured"
    if row["unit"] == "x":
        return f"{m:.2f}x"
    if row["unit"] == " s":
        return f"{m:,.1f} s"
    return f"{m:,.0f}{row['unit']}"


def _scale_threshold(row: dict[str, Any]) -> str:
    """A threshold as its measured figure is written (another system's measured figure is one too)."""
    return _scale_measured({**row, "measured": row["threshold"]})


def _scale_verdict(row: dict[str, Any]) -> str:
    if row["threshold"] is None:
        return "measured"
    if row.get("too_short"):
        return "**too short**"
    return _verdict(row["passed"])


def scale_chart(result: dict[str, Any], path: Path) -> None:
    """Throughput against partitions, one line per system; hollow markers: window too short."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    colors = {"limit": "#888888", "mm2": "#d9822b", "sparkmirror_at_least_once": "#3c78d8",
              "sparkmirror_exactly_once": "#1c4587"}  # fmt: skip
    points = sorted((int(k), v) for k, v in result["sweep"].items())
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for name in SYSTEMS:
        xs, ys, short = [], [], []
        for n, point in points:
            sm = point["summary"].get(name)
            if sm and sm.get("records_per_s"):
                xs.append(n)
                ys.append(sm["records_per_s"])
                short.append(bool(sm.get("window_too_short")))
        if not xs:
            continue
        ax.plot(xs, ys, "-", color=colors[name], label=LABELS[name])
        for x, y, sh in zip(xs, ys, short, strict=True):
            ax.plot([x], [y], "o", color=colors[name], markerfacecolor="white" if sh else colors[name])
            ax.annotate(f"{y:,.0f}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xscale("log")
    ax.set_xticks([n for n, _p in points], [f"{n:,}" for n, _p in points])
    ax.minorticks_off()
    ax.set_xlabel("partitions mirrored")
    ax.set_ylabel("records/s (first to last record on B)")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}"))
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"Throughput against partitions, {result['settings']['size']} B records "
                 f"(hollow: transfer < {result['min_window_s']:.0f} s)", fontsize=10)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render_scale(
    result: dict[str, Any],
    json_path: Path,
    png_path: Path,
    targets: list[dict[str, Any]],
    extra: dict[str, Path],
) -> str:
    sc, st, summary = result["scale"], result["settings"], result["summary"]
    parts, hot = sc["topics"] * sc["partitions"], min(sc["hot"], sc["topics"])
    rel_json, rel_png = json_path.relative_to(REPO), png_path.relative_to(REPO)
    lines = [
        f"## Scale: {parts:,} partitions, {sc['groups']:,} consumer groups (issue 16)",
        "",
        f"`{result['command']}` on {result['date'][:10]} ({result.get('elapsed_s', 0) / 60:.0f} min): "
        f"{sc['topics']} topics x {sc['partitions']} partitions ({parts:,} partitions; the first {hot} topics "
        f"hot, holding half of the {st['records']:,} records of {st['size']} B), {sc['groups']:,} consumer groups "
        f"committed on A, checkpoint interval {result['checkpoint_interval_s']} s, {st['runs']} run(s) per system, "
        f"one system after another on the same brokers and data. Raw results: [`{rel_json}`]({rel_json})"
        + "".join(f", [`{p.relative_to(REPO)}`]({p.relative_to(REPO)})" for p in extra.values())
        + ".",
        "",
        *(
            []
            if result.get("complete", True)
            else [
                f"**This run did not finish**: it stopped during or after its {result.get('phase')} phase; "
                "what it measured up to then is below.",
                "",
            ]  # fmt: skip
        ),
        f"![throughput against partitions]({rel_png})",
        "",
        "| system | records/s | transfer s | first record on B s | CPU s (transfer) | CPU µs/record | peak RSS MB "
        "(tree) | driver MB | Python workers MB | latency p50 / p99 ms | freshness p50 / p99 s (groups) "
        "| re-read after failover | lost |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for name in SYSTEMS:
        sm = summary.get(name)
        if sm is None:
            continue
        status = " (FAILED)" if sm["failed"] else ""
        short = " (too short)" if sm.get("window_too_short") else ""
        fresh = (
            "–"
            if sm.get("freshness_p99_s") is None
            else f"{sm['freshness_p50_s']:.1f} / {sm['freshness_p99_s']:.1f} "
            f"({sm['freshness_arrived']:,.0f} of {sm['freshness_groups']:,.0f})"
        )
        lat = (
            "–" if sm.get("latency_p99_ms") is None else f"{_num(sm['latency_p50_ms'])} / {_num(sm['latency_p99_ms'])}"
        )
        lines.append(
            f"| {LABELS[name]}{status} | {_num(sm['records_per_s'])} | {_num(sm['transfer_s'], 1)}{short} "
            f"| {_num(sm['first_record_s'], 1)} | {_num(sm['cpu_s_transfer'], 1)} "
            f"| {_num(sm['cpu_us_per_record'], 1)} | {_num(sm['peak_rss_mb'])} | {_num(sm['peak_rss_mb_driver'])} "
            f"| {_num(sm['peak_rss_mb_python_workers'])} "
            f"| {lat} | {fresh} | {_num(sm['reread_after_failover'])} | {_num(sm['lost'])} |"
        )
    rate = next((sm.get("latency_rate") for sm in summary.values() if sm.get("latency_rate")), None)
    # Runs before 2026-11-28 have no scale_generator: their load was librdkafka's.
    generator = (
        f"Java's producer (`bench/jvm/PacedLoad.java`, {st.get('scale_generator_producers', 1)} producer(s))"
        if st.get("scale_generator") == "java"
        else "librdkafka's producer (one partition per produce request: its own queue is in the figures)"
    )
    lines += [
        "",
        f"Latency: {st['rate']:,} records/s offered (achieved: {_num(rate)}) by {generator}, round robin over all "
        f"{parts:,} partitions for {st['latency_seconds']} s after {st['warmup_seconds']} s of warm-up that B had to "
        "hold first, by a fresh process of each system on an emptied B (A's records deleted first, so no catch-up); "
        f"latency = append time on B - the record's timestamp on A. {APPEND_NOT_COMMIT} Freshness: every group "
        "commits a new position on "
        "A while the system runs; the time from each commit to the checkpoint on B that carries it. Driver: the "
        "sparkmirror process and its helper processes plus Spark's JVM (in `local[*]` the JVM also runs the "
        "executors' tasks; sum of their peaks over the throughput, checkpoint and latency phases); Python workers: "
        "PySpark's workers, where the executors' Python code runs.",
        "",
        "### Throughput against partitions",
        "",
        "| partitions (topics x partitions) | records | " + " | ".join(LABELS[n] for n in SYSTEMS) + " |",
        "|---|--:|" + "--:|" * len(SYSTEMS),
    ]
    for n, point in sorted((int(k), v) for k, v in result["sweep"].items()):
        cells = []
        for name in SYSTEMS:
            sm = point["summary"].get(name)
            if sm is None:
                cells.append("–")
            elif sm.get("records_per_s") is None:
                cells.append("failed" if sm.get("failed") else "–")
            else:
                flag = ", too short" if sm.get("window_too_short") else ""
                cells.append(f"{sm['records_per_s']:,.0f} ({sm['transfer_s']:.0f} s{flag})")
        lines.append(f"| {n:,} ({point['topics']} x {point['partitions_per_topic']}) | {point['records']:,} | "
                     + " | ".join(cells) + " |")  # fmt: skip
    lines += [
        "",
        f"records/s (transfer seconds, first to last record on B); a transfer under {result['min_window_s']:.0f} s "
        "is marked too short to quote.",
        "",
        "### Targets (issues 16 and 27)",
        "",
        "| target | measured | threshold | | note |",
        "|---|--:|--:|---|---|",
    ]
    for t in targets:
        threshold = "–" if t["threshold"] is None else f"{'≤' if t['at_most'] else '≥'} {_scale_threshold(t)}"
        lines.append(f"| {t['target']} | {_scale_measured(t)} | {threshold} | {_scale_verdict(t)} | {t['note']} |")
    fails = [
        f"- {LABELS[n]}: {f.splitlines()[0][:300]}" for n in SYSTEMS for f in summary.get(n, {}).get("failures", [])
    ]
    for n, point in result["sweep"].items():
        if point.get("main"):
            continue
        for name in SYSTEMS:
            for f in point["summary"].get(name, {}).get("failures", []):
                fails.append(f"- {LABELS[name]} at {int(n):,} partitions: {f.splitlines()[0][:300]}")
    if fails:
        lines += ["", "### Failures (scale)", "", *fails]
    m, load = result["machine"], result.get("machine_load", {})
    lines += [
        "",
        f"Machine: {m['cpus']} CPUs, {m['memory_gib']} GiB, shared with other work (load average "
        f"{load.get('before', {}).get('loadavg')} before, {load.get('after', {}).get('loadavg')} after). sparkmirror "
        f"code: commit {result['sparkmirror_code']['commit']}"
        + (
            f" with uncommitted changes to {', '.join(result['sparkmirror_code']['uncommitted_src_files'])}"
            if result["sparkmirror_code"]["uncommitted_src_files"]
            else ""
        )  # fmt: skip
        + f". Brokers: {broker_jit_text(st)}. MM2 `tasks.max={st['tasks_max']}`, limit loop "
        f"{st['limit_threads']} copy threads" + _writer_text(st) + ". How the scale "
        "scenario measures: [bench/README.md](bench/README.md).",
        "",
    ]
    return "\n".join(lines)


def newest_scale() -> Path | None:
    found = []
    for p in RESULTS.glob("*-scale*.json"):
        match = SCALE_RESULT.fullmatch(p.name)
        if match and "summary" in json.loads(p.read_text()):
            found.append(((match.group(1), int(match.group(2) or 1)), p))
    return max(found)[1] if found else None


def _newest(pattern: str) -> Path | None:
    found = sorted(RESULTS.glob(pattern))
    return found[-1] if found else None


def newest_result() -> Path:
    found = sorted(p for p in RESULTS.glob("*.json") if re.fullmatch(r"\d{4}-\d{2}-\d{2}\.json", p.name))
    if not found:
        raise SystemExit(f"no result in {RESULTS}; run `make bench` first")
    return found[-1]


def broker_jit_text(settings: dict[str, Any]) -> str:
    """The brokers' JIT as a run's settings record it (runs before 2026-12-01 record none: the first tier)."""
    if settings.get("broker_jit", "first-tier") == "full":
        return "both JIT tiers, as production brokers run"
    return "the first JIT tier only (`-XX:TieredStopAtLevel=1`, the dev clusters' setting)"


def main(argv: list[str] | None = None) -> Path:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("result", nargs="?", type=Path, help="a bench/results/<date>.json (default: the newest)")
    args = ap.parse_args(argv)
    given = args.result.resolve() if args.result else None
    scale_path = given if given is not None and SCALE_RESULT.fullmatch(given.name) else newest_scale()
    json_path = given if given is not None and given != scale_path else newest_result().resolve()
    result = json.loads(json_path.read_text())
    result["targets"] = check_targets(result)
    png_path = json_path.with_suffix(".png")
    chart(result, png_path)
    text = render(result, json_path, png_path)
    written = [png_path]
    if scale_path is not None:
        scale = json.loads(scale_path.read_text())
        offsetmap = _newest("*-offsetmap-chains-day.json") or _newest("*-offsetmap.json")
        extra = {k: p.resolve() for k, p in (("cycle", _newest("*-checkpoint-cycle-10000.json")),
                                             ("offsetmap", offsetmap)) if p is not None}  # fmt: skip
        loaded = {k: json.loads(p.read_text()) for k, p in extra.items()}
        targets = check_scale_targets(scale, loaded.get("cycle"), loaded.get("offsetmap"))
        scale_png = scale_path.with_suffix(".png")
        scale_chart(scale, scale_png)
        written.append(scale_png)
        marker = "## Machine, versions, settings"
        section = render_scale(scale, scale_path, scale_png, targets, extra)
        text = text.replace(marker, section + "\n" + marker, 1) if marker in text else text + "\n" + section
        print("scale targets (issues 16 and 27):")
        for t in targets:
            print(f"  {_scale_verdict(t).strip('*'):8}  {t['target']}: {_scale_measured(t)}")
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT.relative_to(REPO)} and {', '.join(str(p.relative_to(REPO)) for p in written)}")
    for t in result["targets"]:
        print(f"  {_verdict(t['passed']).strip('*'):4}  {t['target']}: {_measured(t)}")
    return OUTPUT


if __name__ == "__main__":
    main()
