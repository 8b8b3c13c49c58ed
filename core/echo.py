"""The echo record, schema v1: one JSON object per Kafka message, a public contract.

See docs/echo-format.md. Probes write it; the streaming job parses it (vectorised, in
``streaming.parse.v1_template`` and ``v1_json``) and this module is the reference implementation
both are tested against.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, fields
from typing import Any, Final, Literal, get_args

from core.labels import MAX_LABEL_BYTES, too_long

SCHEMA_VERSION: Final = 1
#: Timestamps outside [2001-09-09, 2286-11-20] in microseconds are absurd, not data.
MIN_EPOCH_US: Final = 1_000_000_000_000_000
MAX_EPOCH_US: Final = 9_999_999_999_000_000
#: A real echo is ~300 bytes; anything over this is refused unparsed, so one hostile record
#: costs bounded time and memory (a 10 MB value is counted ``too_large``, never parsed).
MAX_ECHO_BYTES: Final = 64 * 1024
#: A real echo nests one level; deeper nesting (1,000 ``[`` overflowed Python's stack) is bad.
MAX_ECHO_DEPTH: Final = 32

BadReason = Literal[
    "not_json",
    "version",
    "type",
    "system",  # an unknown ``system`` (not one of SYSTEMS)
    "missing_field",
    "bad_type",
    "negative",
    "absurd_time",
    "order",
    "tombstone",  # a null Kafka value
    "too_large",  # over MAX_ECHO_BYTES
    "not_utf8",
    "too_deep",  # nested deeper than MAX_ECHO_DEPTH
    "non_finite",  # NaN or ±Infinity (not JSON, though parsers accept it) for an integer field
    "duplicate_key",
    "not_object",  # valid JSON, but not an object
    "future",  # event time too far ahead of the Kafka record's timestamp (streaming only)
    "series_cap",  # a new (cluster, topic, partition) beyond max_series (streaming only)
    "bad_length",  # v2: the batch's size is not what its header says (truncated, or trailing)
    "bad_header",  # v2: reserved header bits or padding set
    "empty_batch",  # v2: a batch of no records
    "label_too_long",  # probe, cluster or topic longer than core.labels.MAX_LABEL_BYTES
]
#: The probed systems an echo may name; absent means ``kafka`` (echoes written before the field).
System = Literal["kafka", "nats", "redis", "rabbitmq"]
SYSTEMS: Final[tuple[str, ...]] = get_args(System)
DEFAULT_SYSTEM: Final = "kafka"
#: The topic echo records go to unless configured: probes write it, the stream job reads it.
DEFAULT_ECHO_TOPIC: Final = "nines.echoes"

#: Every reason a record is counted bad, in the order they are documented (docs/echo-format.md).
BAD_REASONS: Final[tuple[str, ...]] = get_args(BadReason)


class BadEcho(ValueError):
    """A record that is not a valid schema-v1 echo; ``reason`` is one of BAD_REASONS."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


@dataclass(frozen=True)
class LatencySpan:
    """One latency kind of an echo: ``end - start``, or the ``if_lost`` field for a lost one."""

    end: str
    start: str
    if_lost: str | None = None


#: The one definition of each measured kind, read by ``Echo`` (the reference) and by the Spark
#: column expressions in ``streaming.histograms``. Latencies are measured from the intended time.
LATENCY_SPANS: Final[dict[str, LatencySpan]] = {
    # a lost message is never received: its latency is at least the loss timeout
    "e2e": LatencySpan("received_us", "intended_us", if_lost="timeout_us"),
    "publish": LatencySpan("acked_us", "intended_us"),
    "send_lag": LatencySpan("sent_us", "intended_us"),
}


@dataclass(frozen=True, slots=True)
class Echo:
    """The fate of one probe message. Latencies are measured from ``intended_us``.

    The fields' order is a wire contract: ``encode_record`` writes them in it, and the job's
    template parser (``streaming.parse.v1_template``) derives the byte layout it reads from it.
    """

    probe: str
    cluster: str
    topic: str
    partition: int
    leader: int
    seq: int
    size: int
    intended_us: int
    sent_us: int
    acked_us: int | None
    received_us: int | None
    lost: bool = False
    timeout_us: int | None = None
    v: int = SCHEMA_VERSION
    type: str = "echo"
    #: The kind of broker probed (``SYSTEMS``); only a non-Kafka one is written out.
    system: str = DEFAULT_SYSTEM

    def latency_us(self, kind: str) -> int | None:
        """The latency of one kind (``LATENCY_SPANS``); None when its end was never reached."""
        span = LATENCY_SPANS[kind]
        if self.lost and span.if_lost is not None:
            lost_value: int | None = getattr(self, span.if_lost)
            return lost_value
        end: int | None = getattr(self, span.end)
        return None if end is None else end - int(getattr(self, span.start))

    @property
    def end_to_end_us(self) -> int | None:
        """Latency from intended send to receipt; for a lost message, at least its timeout."""
        return self.latency_us("e2e")

    @property
    def publish_us(self) -> int | None:
        """Latency from intended send to the broker's ack."""
        return self.latency_us("publish")

    @property
    def send_lag_us(self) -> int:
        """How late the probe itself sent the message."""
        return int(self.latency_us("send_lag") or 0)


@dataclass(frozen=True, slots=True)
class Hiccup:
    """The probe's own pauses over one interval (jHiccup-style), so probe stalls are visible."""

    probe: str
    cluster: str
    start_us: int
    end_us: int
    max_us: int
    total_us: int
    count: int
    v: int = SCHEMA_VERSION
    type: str = "hiccup"


_ECHO_INT_FIELDS: Final = ("partition", "leader", "seq", "size", "intended_us", "sent_us")
_ECHO_STR_FIELDS: Final = ("probe", "cluster", "topic")
_HICCUP_INT_FIELDS: Final = ("start_us", "end_us", "max_us", "total_us", "count")


_ENCODER: Final = json.JSONEncoder(separators=(",", ":"))
_FIELD_NAMES: Final = {cls: tuple(f.name for f in fields(cls)) for cls in (Echo, Hiccup)}
_KNOWN_FIELDS: Final = frozenset(_FIELD_NAMES[Echo]) | frozenset(_FIELD_NAMES[Hiccup])


def encode_record(record: Echo | Hiccup) -> bytes:
    """Compact JSON bytes of one record.

    Built field by field: ``dataclasses.asdict`` deep-copies, several times the cost, out of
    the probe's per-message budget (docs/benchmarks.md, figures the code cites).
    """
    names = _FIELD_NAMES[type(record)]
    obj = {name: getattr(record, name) for name in names}
    if obj.get("system") == DEFAULT_SYSTEM:
        # absent means kafka: a Kafka probe's echoes stay byte for byte what they were
        del obj["system"]
    return _ENCODER.encode(obj).encode()


def _int(obj: dict[str, Any], name: str, *, nullable: bool = False, minimum: int = 0) -> int | None:
    if name not in obj:
        if nullable:
            return None
        raise BadEcho("missing_field", name)
    value = obj[name]
    if value is None and nullable:
        return None
    if isinstance(value, float) and not math.isfinite(value):  # NaN, Infinity, 1e999
        raise BadEcho("non_finite", name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadEcho("bad_type", f"{name} must be an integer")
    if value < minimum:
        raise BadEcho("negative", name)
    return value


def _time(obj: dict[str, Any], name: str, *, nullable: bool = False) -> int | None:
    value = _int(obj, name, nullable=nullable)
    if value is not None and not MIN_EPOCH_US <= value <= MAX_EPOCH_US:
        raise BadEcho("absurd_time", name)
    return value


def _str(obj: dict[str, Any], name: str) -> str:
    if name not in obj:
        raise BadEcho("missing_field", name)
    value = obj[name]
    if not isinstance(value, str):
        raise BadEcho("bad_type", f"{name} must be a string")
    if not value.isascii():
        try:  # a lone surrogate escape ("\\ud800") parses, but is no UTF-8 string
            value.encode()
        except UnicodeEncodeError:
            raise BadEcho("not_utf8", name) from None
    if too_long(name, value):  # a label value: bounded like the series count (core.labels)
        raise BadEcho("label_too_long", f"{name} over {MAX_LABEL_BYTES[name]} bytes")
    return value


class _Object(dict[str, Any]):
    """A JSON object that remembers which of its keys appeared more than once."""

    duplicated: frozenset[str] = frozenset()


def _object(pairs: list[tuple[str, Any]]) -> _Object:
    obj = _Object(pairs)
    if len(obj) != len(pairs):
        keys = [k for k, _ in pairs]
        obj.duplicated = frozenset(k for k in obj if keys.count(k) > 1)
    return obj


_DECODER: Final = json.JSONDecoder(object_pairs_hook=_object)
_TOKENS: Final = re.compile(r'\\.|["\[\]{}]', re.DOTALL)


def nesting_depth(text: str) -> int:
    """Deepest ``[``/``{`` nesting outside strings, in one linear scan (no recursion)."""
    depth = deepest = 0
    in_string = False
    for m in _TOKENS.finditer(text):
        tok = m.group()
        if tok == '"':
            in_string = not in_string
        elif in_string or len(tok) == 2:
            continue
        elif tok in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _brief(value: Any) -> str:
    """A short, safe ``repr`` for an error message (the value may be huge or deep)."""
    if isinstance(value, str | int | float | bool | None):
        return repr(value)[:40]
    return type(value).__name__


def _load(data: bytes | str | None) -> dict[str, Any]:
    """The JSON object of one record, or ``BadEcho`` for anything not strict, bounded JSON."""
    if data is None:
        raise BadEcho("tombstone")
    size = len(data) if isinstance(data, bytes) else len(data.encode(errors="replace"))
    if size > MAX_ECHO_BYTES:
        raise BadEcho("too_large", f"{size} bytes")
    try:
        text = data.decode() if isinstance(data, bytes) else data
    except UnicodeDecodeError:
        raise BadEcho("not_utf8") from None
    # checked before parsing: Python's parser recurses, to ~1,000 levels less the caller's stack
    if text.count("[") + text.count("{") > MAX_ECHO_DEPTH and nesting_depth(text) > MAX_ECHO_DEPTH:
        raise BadEcho("too_deep")
    try:
        obj = _DECODER.decode(text)
    except RecursionError:
        raise BadEcho("too_deep") from None
    except ValueError:
        raise BadEcho("not_json") from None
    if not isinstance(obj, dict):
        raise BadEcho("not_object", type(obj).__name__)
    # two values for a field we read: parsers disagree on which wins (extra fields are ignored)
    duplicated: frozenset[str] = getattr(obj, "duplicated", frozenset()) & _KNOWN_FIELDS
    if duplicated:
        raise BadEcho("duplicate_key", ", ".join(sorted(duplicated)))
    return obj


def decode_record(data: bytes | str | None) -> Echo | Hiccup:
    """Parse and validate one record; raises ``BadEcho`` with a reason, never anything else.

    Any byte string gets a reason: a null Kafka value, oversize, non-UTF-8, deep nesting,
    NaN/Infinity, duplicate fields and non-objects included (see docs/echo-format.md).
    """
    obj = _load(data)
    if obj.get("v") != SCHEMA_VERSION:
        raise BadEcho("version", _brief(obj.get("v")))
    kind = obj.get("type", "echo")
    if kind == "hiccup":
        ints = {name: _int(obj, name) for name in _HICCUP_INT_FIELDS}
        start, end = _time(obj, "start_us"), _time(obj, "end_us")
        assert start is not None and end is not None
        if end < start:
            raise BadEcho("order", "end_us < start_us")
        return Hiccup(
            probe=_str(obj, "probe"),
            cluster=_str(obj, "cluster"),
            start_us=start,
            end_us=end,
            max_us=ints["max_us"] or 0,
            total_us=ints["total_us"] or 0,
            count=ints["count"] or 0,
        )
    if kind != "echo":
        raise BadEcho("type", _brief(kind))
    strs = {name: _str(obj, name) for name in _ECHO_STR_FIELDS}
    ints = {
        name: _int(obj, name, minimum=-1 if name == "leader" else 0) for name in _ECHO_INT_FIELDS
    }
    intended, sent = _time(obj, "intended_us"), _time(obj, "sent_us")
    acked = _time(obj, "acked_us", nullable=True)
    received = _time(obj, "received_us", nullable=True)
    system = obj.get("system", DEFAULT_SYSTEM)
    if not isinstance(system, str):
        raise BadEcho("bad_type", "system must be a string")
    if system not in SYSTEMS:
        raise BadEcho("system", _brief(system))
    lost = obj.get("lost", False)
    if not isinstance(lost, bool):
        raise BadEcho("bad_type", "lost must be a boolean")
    timeout = _int(obj, "timeout_us", nullable=True)
    assert intended is not None and sent is not None
    if lost and timeout is None:
        raise BadEcho("missing_field", "timeout_us (required when lost)")
    if not lost and received is None:
        raise BadEcho("missing_field", "received_us (required unless lost)")
    for name, value in (("sent_us", sent), ("acked_us", acked), ("received_us", received)):
        if value is not None and value < intended:
            raise BadEcho("order", f"{name} < intended_us")
    return Echo(
        probe=strs["probe"],
        cluster=strs["cluster"],
        topic=strs["topic"],
        partition=ints["partition"] or 0,
        leader=ints["leader"] or 0,
        seq=ints["seq"] or 0,
        size=ints["size"] or 0,
        intended_us=intended,
        sent_us=sent,
        acked_us=acked,
        received_us=received,
        lost=lost,
        timeout_us=timeout,
        system=system,
    )
