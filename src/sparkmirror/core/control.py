"""Flow control: what an operator asked of a running flow (pause, throttle), its record format, and
the rules that turn a byte rate into each task's share and each read's size.

An operator's command (``sparkmirror pause|resume|throttle``) writes a :class:`FlowControl`
record, keyed by the flow's name, to the compacted topic :data:`CONTROL_TOPIC` on the flow's
target, the same cluster ``status`` reads; the running flow's driver follows that topic and hands
its tasks what it says with its answer to their next report (at least every second). The control
channel never carries correctness: a paused partition is simply not read, and a throttled task
reads later, so nothing is skipped whatever the record says or whether it arrives.

What is throttled: the key and value bytes of the records a flow copies (the bytes
``sparkmirror_byte_count_total`` counts), not the wire's (batching and compression make those
smaller). Checkpoints, heartbeats, offset syncs and status are never
throttled: they are not copied by the flow's tasks.

Pure: no pyspark, no Kafka client. Times are the caller's monotonic clock, in seconds.

Record value: UTF-8 JSON with a ``version`` field (0); unknown fields are ignored, a missing or
malformed field raises :class:`FormatError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import TypeVar

from sparkmirror.core.exceptions import FormatError
from sparkmirror.core.formats import json_record

#: The compacted topic on each target cluster holding the operator's last word for each flow into it.
CONTROL_TOPIC = "sparkmirror-control.internal"
#: A task's bucket holds at most this many seconds of its rate: the burst a task may copy at once
#: after waiting (kept small so that any 10 s window stays within 10% of the limit).
BURST_S = 0.5
#: A task that was not held back in its last report gets its measured rate times this (and what is
#: left over is shared by all): room to grow before it is held back and asks for more.
HEADROOM = 1.25

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class FlowControl:
    """The operator's last word for one flow: what is paused, and the byte rate it may copy at.

    ``bytes_per_second``: ``None`` follows the configuration (``sparkmirror.throttle.bytes.per.second``),
    0 lifts every limit the configuration sets for the flow, a positive number replaces it.
    """

    flow: str
    #: The whole flow is paused: no source partition is read.
    paused: bool = False
    #: Regexes (full match) of source topics that are paused while the rest of the flow copies.
    paused_topics: tuple[str, ...] = ()
    bytes_per_second: int | None = None
    #: When and by whom it was last changed (``user@host``), for ``status``.
    updated_ms: int = 0
    by: str = ""

    VERSION = 0

    def __post_init__(self) -> None:
        for pattern in self.paused_topics:
            compile_topics(pattern)
        if self.bytes_per_second is not None and self.bytes_per_second < 0:
            raise FormatError(f"flow {self.flow}: bytes_per_second must be at least 0, got {self.bytes_per_second}")

    def key_bytes(self) -> bytes:
        return self.flow.encode()

    def value_bytes(self) -> bytes:
        body = asdict(self)
        body["paused_topics"] = list(self.paused_topics)
        return json.dumps({"version": self.VERSION, **body}, sort_keys=True).encode()

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> FlowControl:
        data = json_record("FlowControl", key, value, cls.VERSION)
        try:
            rate = data.get("bytes_per_second")
            topics = data.get("paused_topics") or []
            if not isinstance(topics, list):
                raise TypeError("paused_topics is not a list")
            control = cls(
                flow=str(data["flow"]),
                paused=bool(data.get("paused", False)),
                paused_topics=tuple(str(t) for t in topics),
                bytes_per_second=None if rate is None else int(rate),
                updated_ms=int(data.get("updated_ms", 0)),
                by=str(data.get("by", "")),
            )
        except (KeyError, TypeError, ValueError, FormatError) as exc:
            raise FormatError(f"FlowControl value of {key!r}: missing or bad field: {exc}") from None
        if control.flow.encode() != key:
            raise FormatError(f"FlowControl value of {key!r} names another flow: {control.flow!r}")
        return control

    # -- the commands' changes ---------------------------------------------------------------
    def pause(self, topics: str | None, *, at_ms: int, by: str) -> FlowControl:
        """Paused: the whole flow (``topics`` None), or also the topics ``topics`` matches."""
        if topics is None:
            return replace(self, paused=True, updated_ms=at_ms, by=by)
        compile_topics(topics)
        kept = tuple(t for t in self.paused_topics if t != topics)
        return replace(self, paused_topics=(*kept, topics), updated_ms=at_ms, by=by)

    def resume(self, topics: str | None, *, at_ms: int, by: str) -> FlowControl:
        """Resumed: everything (``topics`` None), or the topics paused by exactly that regex.

        Raises :class:`ValueError` naming what is paused when ``topics`` is not one of the paused
        regexes (a regex cannot be taken out of another one)."""
        if topics is None:
            return replace(self, paused=False, paused_topics=(), updated_ms=at_ms, by=by)
        if topics not in self.paused_topics:
            paused = ", ".join(repr(t) for t in self.paused_topics) or "none"
            whole = "; the whole flow is paused (resume it without --topics)" if self.paused else ""
            raise ValueError(f"topics {topics!r} were not paused by that pattern; paused patterns: {paused}{whole}")
        return replace(self, paused_topics=tuple(t for t in self.paused_topics if t != topics), updated_ms=at_ms, by=by)

    def throttle(self, bytes_per_second: int | None, *, at_ms: int, by: str) -> FlowControl:
        return replace(self, bytes_per_second=bytes_per_second, updated_ms=at_ms, by=by)

    # -- what it means ----------------------------------------------------------------------
    def is_paused(self, topic: str) -> bool:
        """Whether ``topic`` (a source topic) is not to be read."""
        return self.paused or any(compile_topics(p).fullmatch(topic) for p in self.paused_topics)

    def limit(self, configured: int | None) -> int | None:
        """The flow's byte rate: this record's, else the configured one; ``None``: no limit."""
        if self.bytes_per_second is None:
            return configured
        return self.bytes_per_second or None


def compile_topics(pattern: str) -> re.Pattern[str]:
    try:
        return _compiled(pattern)
    except re.error as exc:
        raise FormatError(f"--topics {pattern!r}: not a regular expression ({exc})") from None


_PATTERNS: dict[str, re.Pattern[str]] = {}


def _compiled(pattern: str) -> re.Pattern[str]:
    found = _PATTERNS.get(pattern)
    if found is None:
        found = _PATTERNS[pattern] = re.compile(pattern)
    return found


def latest_control(records: Iterable[tuple[bytes | None, bytes | None]], flow: str) -> FlowControl:
    """``flow``'s last control record among the topic's records (none, or a tombstone: nothing asked).
    Only that flow's record is decoded: another flow's unreadable one is not this flow's concern."""
    key = flow.encode()
    last: bytes | None = None
    for k, value in records:
        if k == key:
            last = value
    return FlowControl(flow) if last is None else FlowControl.decode(key, last)


def share(total: float, wants: Mapping[K, float | None]) -> dict[K, float]:
    """``total`` bytes/s shared among claimants, max-min fair: each gets at most what it wants
    (``None``: as much as it can get), the ones that want less leave the rest to the others, and what
    nobody wants is spread evenly on top (so the shares always add up to ``total``: none is lost to a
    claimant that has just fallen quiet, and one that wakes has room to show it)."""
    if not wants:
        return {}
    out: dict[K, float] = {}
    left = float(total)
    pending = sorted(wants, key=lambda k: (wants[k] is None, wants[k] or 0.0))
    while pending:
        fair = left / len(pending)
        k = pending[0]
        want = wants[k]
        if want is not None and want < fair:
            out[k] = want
            left -= want
            pending.pop(0)
            continue
        for k in pending:  # everyone left wants at least the fair share
            out[k] = fair
        left = 0.0
        break
    if left > 0:
        extra = left / len(out)
        out = {k: v + extra for k, v in out.items()}
    return out


def wanted(rate: float, held: bool) -> float | None:
    """What a claimant wants of a shared limit, from its last window: more than it had if it was held
    back (``None``: no bound), else what it copied with some headroom."""
    return None if held else rate * HEADROOM


@dataclass
class TokenBucket:
    """A task's byte budget: refilled at ``rate`` bytes/s up to :data:`BURST_S` seconds' worth.

    The balance may go below zero: a read takes what it copied, and the task waits for the debt to
    be paid before it reads again, so over any window the bytes copied are at most the rate times
    the window plus one burst and one read.
    """

    rate: float | None = None
    tokens: float = 0.0
    at: float = 0.0
    #: Seconds spent waiting for tokens (held back by the limit), in total.
    held_s: float = 0.0
    _sizes: list[float] = field(default_factory=lambda: [0.0, 0.0])

    def set_rate(self, rate: float | None, now: float) -> None:
        """A new rate from now on (``None``: no limit); what was earned so far is kept."""
        self._refill(now)
        if rate is not None and self.rate is None:
            self.tokens = min(0.0, self.tokens)  # a limit starts without a stored burst
        self.rate = rate

    def take(self, nbytes: int, records: int, now: float) -> None:
        """``records`` records of ``nbytes`` bytes were copied."""
        self._sizes[0] += nbytes
        self._sizes[1] += records
        if self.rate is None:
            return
        self._refill(now)
        self.tokens -= nbytes

    def wait_s(self, now: float) -> float:
        """Seconds until the task may read again (0: now)."""
        if self.rate is None:
            return 0.0
        self._refill(now)
        if self.tokens >= 0:
            return 0.0
        return -self.tokens / self.rate if self.rate > 0 else float("inf")

    def room(self, now: float, most: int) -> int:
        """Most records the next read may take, by the average record size so far (at least one)."""
        if self.rate is None:
            return most
        self._refill(now)
        nbytes, records = self._sizes
        if records <= 0 or nbytes <= 0:
            return 1  # no size known yet: one record tells it
        fits = int(max(0.0, self.tokens) / (nbytes / records))
        return max(1, min(most, fits))

    def held(self, seconds: float) -> None:
        self.held_s += seconds

    def _refill(self, now: float) -> None:
        if self.rate is not None and now > self.at:
            self.tokens = min(self.rate * BURST_S, self.tokens + (now - self.at) * self.rate)
        self.at = max(self.at, now)
