"""docs/benchmarks.md's HTTP-layer section is read from bench.web_protocol's JSON, nothing typed."""

from __future__ import annotations

from pathlib import Path

from bench.report_web_protocol import load, section

RESULTS = {
    "requests": 2000,
    "runs": 5,
    "load_before": ["1.00", "2.00", "3.00"],
    "load_after": ["4.00", "5.00", "6.00"],
    "nice": 19,
    "layer_only_us": {"stdlib": 61.2, "h11": 118.7},
    "same_bytes": {"GET /metrics, gzip": True, "HEAD /metrics": False, "POST": False},
    "flood": {
        "seconds": 10,
        "runs": [
            {
                "layer": "h11",
                "mode": "tls",
                "fresh": {"answered": 5, "of": 8, "median_ms": "235.5", "max_ms": "370.1"},
                "kept": {"answered": 0, "of": 0, "median_ms": "", "max_ms": ""},
                "server_cpu": 0.08,
                "load": 150.36,
            }
        ],
    },
    "stdlib": {
        "cpu_us_per_request_median": 301.4,
        "wall_us_per_request_median": 555.0,
        "cpu_us_per_request": [300.1, 301.4, 310.0],
    },
    "h11": {
        "cpu_us_per_request_median": 350.6,
        "wall_us_per_request_median": 600.2,
        "cpu_us_per_request": [350.6, 349.0, 360.2],
    },
}


def test_rows_and_differences_come_from_the_json() -> None:
    text = section(RESULTS)
    assert (
        "| `BaseHTTPRequestHandler` (now) | 301 µs (300.1, 301.4, 310) | 555 µs | 61 µs |" in text
    )
    assert "| h11 | 351 µs (350.6, 349, 360.2) | 600 µs | 119 µs |" in text
    assert "load 1.00 2.00 3.00 before, 4.00 5.00 6.00 after" in text
    assert "The same bytes for 1 of 3 requests; different for: HEAD /metrics, POST (h11" in text
    assert "h11 is therefore **not taken**: 1.16x the server CPU per scrape" in text
    assert "| h11 | tls | 5/8, median 235.5 ms, max 370.1 ms | 0/0 | 0.08 | 150.36 |" in text
    assert "`tests/metrics_flood.py --seconds 10`" in text


def test_a_missing_or_unreadable_result_says_how_to_measure(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    for path in (tmp_path / "absent.json", tmp_path / "bad.json"):
        assert load(path) == {}
    assert "Not measured yet: `python -m bench.web_protocol --save`." in section({})
