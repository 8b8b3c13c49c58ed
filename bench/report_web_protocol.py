"""docs/benchmarks.md's section on the /metrics server's HTTP layer against h11, from
bench.web_protocol's JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.machine import RESULTS_DIR
from bench.report_format import read_json

RESULTS = RESULTS_DIR / "web_protocol.json"
TITLE = "## The /metrics server's HTTP layer: the standard library against h11"


def load(path: Path = RESULTS) -> dict[str, Any]:
    """The results, or {} when the bench has not run."""
    data = read_json(path)
    return data if isinstance(data, dict) and isinstance(data.get("stdlib"), dict) else {}


def section(results: dict[str, Any]) -> str:
    """The markdown section (empty input: a line saying how to produce it)."""
    cmd = "`python -m bench.web_protocol --save`"
    if not results:
        return f"{TITLE}\n\nNot measured yet: {cmd}.\n"
    layer = results["layer_only_us"]
    lines = [
        TITLE,
        "",
        f"Measured with {cmd} (nice {results['nice']}; load {' '.join(results['load_before'])} "
        f"before, {' '.join(results['load_after'])} after): a server in the bench's process, "
        f"one client process sending {results['requests']:,} keep-alive GETs of /metrics on one "
        "connection (gzip accepted; a 23 KB text body of 300 series, compressed once), the two "
        f"layers in turn, {results['runs']} runs each. CPU is the server process's per request; "
        "the layer alone is the head in and the answer out in one thread, without sockets.",
        "",
        "| HTTP layer | server CPU per scrape, median (runs) | client's wall time per scrape | "
        "the layer alone |",
        "|---|---|---|---|",
    ]
    for name, label in (("stdlib", "`BaseHTTPRequestHandler` (now)"), ("h11", "h11")):
        r = results[name]
        runs = ", ".join(f"{v:g}" for v in r["cpu_us_per_request"])
        lines.append(
            f"| {label} | {r['cpu_us_per_request_median']:.0f} µs ({runs}) | "
            f"{r['wall_us_per_request_median']:.0f} µs | {layer[name]:.0f} µs |"
        )
    same = results["same_bytes"]
    differ = [name for name, ok in same.items() if not ok]
    std, h11 = (results[n]["cpu_us_per_request_median"] for n in ("stdlib", "h11"))
    verdict = "taken" if h11 <= std and not differ else "not taken"
    lines += [
        "",
        f"The same bytes for {len(same) - len(differ)} of {len(same)} requests; "
        f"different for: {', '.join(differ) or 'none'} (h11 closes every HTTP/1.0 connection, "
        "frames a HEAD answer itself and expects a request's body to be read; the standard "
        "library's error pages are its own). h11 is therefore "
        f"**{verdict}**: {h11 / std:.2f}x the server CPU per scrape, and "
        f"{'the same' if not differ else 'not the same'} bytes on the wire.",
    ]
    flood = results.get("flood")
    if flood:
        lines += [
            "",
            f"Under `tests/metrics_flood.py --seconds {flood['seconds']:g}` (plain: 550 idle and "
            "550 trickling connections; TLS: 400 idle, 300 trickling, 400 mid-handshake; a scraper "
            "on a new connection and one on a kept connection, every 0.25 s), the layers in turn:",
            "",
            "| HTTP layer | flood | new connection per scrape | kept connection | "
            "server CPU (of a core) | load |",
            "|---|---|---|---|---|---|",
        ]
        for run in flood["runs"]:
            lines.append(
                f"| {run['layer']} | {run['mode']} | {_scrapes(run.get('fresh'))} | "
                f"{_scrapes(run.get('kept'))} | {run.get('server_cpu', 'n/a')} | "
                f"{run.get('load', 'n/a')} |"
            )
    return "\n".join(lines) + "\n"


def _scrapes(seen: dict[str, Any] | None) -> str:
    """``answered/asked, median, max`` of one scraper, or n/a."""
    if not seen:
        return "n/a"
    text = f"{seen['answered']}/{seen['of']}"
    if seen.get("median_ms"):
        text += f", median {seen['median_ms']} ms, max {seen['max_ms']} ms"
    return text
