"""Request variants for /metrics, generated from small grammars: ``Accept-Encoding`` headers
with whether gzip is acceptable (RFC 9110 12.5.3), and request targets with the path each names
(or None: 404). Shared by the server's unit tests and the probe's integration tests."""

from __future__ import annotations

import random
from collections.abc import Iterator

CODINGS = ["gzip", "GZIP", "x-gzip", "*", "identity", "br", "deflate", "nogzip",
           "x-gzip-not-really", "gzipx", "gzip2"]  # fmt: skip
QVALUES = ["", ";q=0", ";q=0.0", ";q=0.000", ";Q=0", ";q=1", ";q=0.5", ";q=0.001", " ; q=0",
           ";q=abc", ";q=2", ";q=-1"]  # fmt: skip


def q_of(param: str) -> float:
    """The reference reading of a q parameter: absent is 1, malformed or outside 0-1 is 0."""
    text = param.replace(" ", "").lower().removeprefix(";q=")
    if not param:
        return 1.0
    try:
        q = float(text)
    except ValueError:
        return 0.0
    return q if 0 <= q <= 1 else 0.0


def accept_encodings(n: int, seed: int = 41) -> Iterator[tuple[str, bool]]:
    """``n`` headers of 1-3 elements, each with whether gzip is acceptable (RFC 9110 12.5.3:
    a coding named explicitly wins over ``*``; q=0 means not acceptable)."""
    rng = random.Random(seed)
    singles = [(c, q) for c in CODINGS for q in QVALUES]
    for c, q in singles:  # every single element once, then random mixes
        yield from [(f"{c}{q}", _reference([(c, q)]))]
    for _ in range(n):
        elements = [rng.choice(singles) for _ in range(rng.randint(2, 3))]
        yield ", ".join(c + q for c, q in elements), _reference(elements)


def _reference(elements: list[tuple[str, str]]) -> bool:
    named = [q_of(q) for c, q in elements if c.lower() in ("gzip", "x-gzip")]
    if named:
        return max(named) > 0
    star = [q_of(q) for c, q in elements if c == "*"]
    return bool(star) and max(star) > 0


SERVED = {"/metrics": "metrics", "/-/healthy": "health", "/-/ready": "health"}


def targets() -> Iterator[tuple[str, str | None]]:
    """Request targets and what each names: the served paths with queries, escapes and the
    absolute form; and near misses of each (404)."""
    for path, kind in SERVED.items():
        for query in ("", "?", "?x", "?a=1&b=2", "?x#frag"):
            yield path + query, kind
        yield "".join(f"%{ord(c):02x}" if c.isalpha() and i % 2 else c
                      for i, c in enumerate(path)), kind  # fmt: skip
        for host in ("127.0.0.1", "example.com:9"):
            yield f"http://{host}{path}", kind
        yield "//" + path.lstrip("/"), kind  # http.server's reading: one leading slash
        for miss in (path + "X", path + "/", path + "/..", path.upper(), path[:-1],
                     "/x" + path, path + "/../../etc/passwd", path.replace("/", "/./", 1),
                     path + "%00", path + "%3Fx", f"http://127.0.0.1{path}X"):  # fmt: skip
            yield miss, None
    for other in ("/", "*", "/foo", "/metricsX", "/metrics/../../etc/passwd", "/index.html",
                  "http://127.0.0.1/", "/%2e%2e/metrics", ""):  # fmt: skip
        yield other, None
