"""A protobuf wire *decoder* for tests and benches: delimited MetricFamily bodies back as dicts.

Independent of ``core.promproto`` (it knows the wire format and metrics.proto's field numbers,
nothing of the encoder), so a round trip checks the encoder against the format, and a real
Prometheus (tests/e2e) checks both against the format's owner.
"""

from __future__ import annotations

import struct
from typing import Any

#: message → field number → (name, kind); kinds: str, double, varint, sint, packed_sint, msg name
SCHEMA: dict[str, dict[int, tuple[str, str]]] = {
    "MetricFamily": {1: ("name", "str"), 2: ("help", "str"), 3: ("type", "varint"),
                     4: ("metric", "Metric")},
    "Metric": {1: ("label", "LabelPair"), 2: ("gauge", "Value"), 3: ("counter", "Value"),
               5: ("untyped", "Value"), 7: ("histogram", "Histogram")},
    "LabelPair": {1: ("name", "str"), 2: ("value", "str")},
    "Value": {1: ("value", "double")},
    "Histogram": {1: ("sample_count", "varint"), 2: ("sample_sum", "double"),
                  3: ("bucket", "Bucket"), 5: ("schema", "sint"),
                  6: ("zero_threshold", "double"), 7: ("zero_count", "varint"),
                  12: ("positive_span", "BucketSpan"), 13: ("positive_delta", "packed_sint")},
    "Bucket": {1: ("cumulative_count", "varint"), 2: ("upper_bound", "double")},
    "BucketSpan": {1: ("offset", "sint"), 2: ("length", "varint")},
}  # fmt: skip
REPEATED = {"metric", "label", "bucket", "positive_span", "positive_delta"}


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A protobuf varint at ``pos``: (value, the position after it)."""
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, pos


def _unzigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def decode(message: str, buf: bytes) -> dict[str, Any]:
    """One message of type ``message``; unknown fields are an error (nothing else is sent)."""
    out: dict[str, Any] = {}
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        field, wire = key >> 3, key & 7
        name, kind = SCHEMA[message][field]
        if wire == 0:
            raw, pos = read_varint(buf, pos)
            value: Any = _unzigzag(raw) if kind == "sint" else raw
        elif wire == 1:
            (value,) = struct.unpack_from("<d", buf, pos)
            pos += 8
        elif wire == 2:
            size, pos = read_varint(buf, pos)
            chunk = buf[pos : pos + size]
            pos += size
            if kind == "str":
                value = chunk.decode()
            elif kind == "packed_sint":
                vals, p = [], 0
                while p < len(chunk):
                    raw, p = read_varint(chunk, p)
                    vals.append(_unzigzag(raw))
                out.setdefault(name, []).extend(vals)
                continue
            else:
                value = decode(kind, chunk)
        else:
            raise AssertionError(f"{message}.{name}: unexpected wire type {wire}")
        if name in REPEATED:
            out.setdefault(name, []).append(value)
        else:
            out[name] = value
    return out


def families(body: bytes) -> list[dict[str, Any]]:
    """Every MetricFamily of a varint-delimited body."""
    out, pos = [], 0
    while pos < len(body):
        size, pos = read_varint(body, pos)
        out.append(decode("MetricFamily", body[pos : pos + size]))
        pos += size
    return out


def samples(body: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, sorted labels) → value, named as the text format names them (histograms:
    ``_bucket`` per ``le`` with ``+Inf``, ``_count``, ``_sum``), to compare with a text scrape."""
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for fam in families(body):
        for m in fam.get("metric", []):
            labels = tuple(sorted((p["name"], p["value"]) for p in m.get("label", [])))
            if "histogram" in m:
                h = m["histogram"]
                for b in h.get("bucket", []):
                    le = (("le", _go_float(b["upper_bound"])),)
                    out[(f"{fam['name']}_bucket", tuple(sorted(labels + le)))] = float(
                        b.get("cumulative_count", 0)
                    )
                inf = (("le", "+Inf"),)
                out[(f"{fam['name']}_bucket", tuple(sorted(labels + inf)))] = float(
                    h.get("sample_count", 0)
                )
                out[(f"{fam['name']}_count", labels)] = float(h.get("sample_count", 0))
                out[(f"{fam['name']}_sum", labels)] = float(h.get("sample_sum", 0.0))
            else:
                (kind,) = [k for k in ("gauge", "counter", "untyped") if k in m]
                out[(fam["name"], labels)] = float(m[kind].get("value", 0.0))
    return out


def native_buckets(h: dict[str, Any]) -> dict[int, int]:
    """A native histogram's positive buckets: index → count (from spans and deltas)."""
    out: dict[int, int] = {}
    deltas = iter(h.get("positive_delta", []))
    index, count = 0, 0
    for span in h.get("positive_span", []):  # the first offset is an index, later ones gaps
        index += span.get("offset", 0)
        for _ in range(span.get("length", 0)):
            count += next(deltas)
            out[index] = count
            index += 1
    return out


def _go_float(v: float) -> str:
    from prometheus_client.utils import floatToGoString

    return str(floatToGoString(v))
