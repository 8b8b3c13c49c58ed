"""The Prometheus text format (0.0.4) of the contract's families, written by hand.

Every line is what prometheus_client's ``generate_latest`` writes for the same family, byte for
byte (tests/unit/exporter), without its per-sample label validation, which a scrape of thousands
of series cannot afford (docs/benchmarks.md, scrape cost): label sets are formatted once per series
and joined with their values (``samples``), each distinct value formatted once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from prometheus_client import generate_latest
from prometheus_client.utils import floatToGoString

from core.windows import SeriesKey
from monitor.exporter.contract import (
    COUNTER_FAMILIES,
    HISTOGRAM,
    HISTOGRAM_HELP,
    NATIVE,
    WINDOW_FAMILIES,
    label_values,
    series_labels,
)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

I64 = npt.NDArray[np.int64]
#: Value encodings kept per distinct value (HDR reports few distinct quantiles); let go at this
#: size (exact maxima are all distinct).
MAX_CACHED_VALUES = 1 << 17


def _escape(value: str) -> str:
    """A label value as the text format wants it."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def labels(pairs: Mapping[str, str], extra: str | None = None) -> str:
    """``name="value",…`` sorted by name, as prometheus_client writes them.

    With ``extra`` (a label whose value varies per line: ``q``, ``le``) the result is a
    ``str.format`` template with ``{}`` in that label's place.
    """
    if extra is None:
        return ",".join(f'{n}="{_escape(pairs[n])}"' for n in sorted(pairs))
    fixed = {n: _escape(v).replace("{", "{{").replace("}", "}}") for n, v in pairs.items()}
    fixed[extra] = "{}"
    return ",".join(f'{n}="{fixed[n]}"' for n in sorted(fixed))


class _Encoded(dict[int, Any]):
    """int → its encoding, computed on first use."""

    def __init__(self, encode: Callable[[int], Any]) -> None:
        super().__init__()
        self._encode = encode

    def __missing__(self, value: int) -> Any:
        out = self[value] = self._encode(value)
        return out


#: A latency in µs as text (seconds, the line's end); a count the same.
_SECONDS_TEXT = _Encoded(lambda us: f"{floatToGoString(us / 1e6)}\n".encode())
_COUNT_TEXT = _Encoded(lambda n: f"{floatToGoString(n)}\n".encode())
#: Below this, ``floatToGoString`` is ``repr``: from 1e6 on it writes an exponent, as Go's
#: clients do, where ``repr`` does not (tests/unit/exporter/test_exposition_values.py).
_REPR_BELOW = 1e6


def _cached_text(cache: _Encoded, values: I64) -> list[bytes]:
    """Values that repeat (HDR's quantiles, sample counts), each formatted once."""
    if len(cache) > MAX_CACHED_VALUES:
        cache.clear()
    return list(map(cache.__getitem__, values.tolist()))


def go_texts(values: npt.NDArray[np.float64]) -> list[bytes]:
    """``floatToGoString`` of each value and a newline (values that rarely repeat: exact maxima,
    counters), without its per-value checks where ``repr`` is the same."""
    if values.size and values.min() >= 0 and values.max() < _REPR_BELOW:
        return [f"{v!r}\n".encode() for v in values.tolist()]
    return [f"{floatToGoString(v)}\n".encode() for v in values.tolist()]


def text_seconds(values_us: I64) -> list[bytes]:
    """Latencies in µs that repeat (quantiles), as seconds."""
    return _cached_text(_SECONDS_TEXT, values_us)


def text_counts(values: I64) -> list[bytes]:
    """Counts that repeat (samples, lost)."""
    return _cached_text(_COUNT_TEXT, values)


def text_exact(values_us: I64) -> list[bytes]:
    """Latencies in µs that rarely repeat (exact maxima), as seconds."""
    return go_texts(values_us / 1e6)


def window_text(
    chunks: Sequence[tuple[bytes, ...]],
    families: Sequence[tuple[str, str, str]] = WINDOW_FAMILIES,
) -> list[bytes]:
    """The per-window gauge families from resolutions' chunks, in the given order (unjoined:
    ``body`` copies them once)."""
    parts = []
    for i, (name, doc, _) in enumerate(families):
        parts.append(f"# HELP {name} {doc}\n# TYPE {name} gauge\n".encode())
        parts.extend(chunk[i] for chunk in chunks)
    return parts


def histogram_lines(
    s: SeriesKey, les: Sequence[str], buckets: Sequence[int], total: int, sum_s: float
) -> str:
    """One series' cumulative ``le`` buckets, count and sum, rendered when a window adds to them."""
    pairs = series_labels(s)
    lv, ll = labels(pairs), labels(pairs, extra="le")
    out = [
        f"{HISTOGRAM}_bucket{{{ll.format(le)}}} {floatToGoString(c)}\n"
        for le, c in zip(les, buckets, strict=True)
    ]
    out.append(f"{HISTOGRAM}_bucket{{{ll.format('+Inf')}}} {floatToGoString(total)}\n")
    out.append(f"{HISTOGRAM}_count{{{lv}}} {floatToGoString(total)}\n")
    out.append(f"{HISTOGRAM}_sum{{{lv}}} {floatToGoString(sum_s)}\n")
    return "".join(out)


def native_lines(s: SeriesKey, total: int, sum_s: float) -> str:
    """A native series in the text format: only its count and sum (the text format has no
    native buckets; client_golang writes a native-only histogram the same way)."""
    pairs = series_labels(s)
    lv, ll = labels(pairs), labels(pairs, extra="le")
    return (
        f"{NATIVE}_bucket{{{ll.format('+Inf')}}} {floatToGoString(total)}\n"
        f"{NATIVE}_count{{{lv}}} {floatToGoString(total)}\n"
        f"{NATIVE}_sum{{{lv}}} {floatToGoString(sum_s)}\n"
    )


def histogram_text(lines: Sequence[str], name: str = HISTOGRAM, doc: str = HISTOGRAM_HELP) -> str:
    """A histogram family from its series' pre-rendered lines, in the given order."""
    return f"# HELP {name} {doc}\n# TYPE {name} histogram\n" + "".join(lines)


@functools.lru_cache(maxsize=1 << 16)  # bounded: two counters per partition are the most
def counter_head(attr: str, key: Any) -> bytes:
    """``name_total{labels} `` of one counter sample: its labels do not change between scrapes."""
    name, _, names = COUNTER_FAMILIES[attr]
    pairs = labels(dict(zip(names, label_values(key), strict=True)))
    return f"{name}_total{{{pairs}}} ".encode()


def counter_family_head(name: str, doc: str) -> bytes:
    """A counter family's ``# HELP`` and ``# TYPE`` lines."""
    return f"# HELP {name}_total {doc}\n# TYPE {name}_total counter\n".encode()


class _Families:
    """What ``generate_latest`` needs: something with ``collect()``."""

    def __init__(self, families: list[Any]) -> None:
        self.families = families

    def collect(self) -> list[Any]:
        return self.families


def families_text(families: Sequence[Any]) -> bytes:
    """prometheus_client metric families as ``generate_latest`` writes them."""
    return generate_latest(_Families(list(families)))  # type: ignore[arg-type]


def body(
    windows: Sequence[bytes], window_end: Any, histogram: str, counters: bytes, rest: Sequence[Any]
) -> list[bytes]:
    """The whole body, in parts: window gauges, window ends, the histograms, counters, then the
    rest (unjoined: a resolution's chunk that did not change is the same part as before, and
    the server keeps its compression; ``core.gzip_parts``)."""
    head = families_text([window_end])
    tail = families_text(rest)
    return [*windows, head, histogram.encode(), counters, tail]
