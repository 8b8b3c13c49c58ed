"""`nines report` plots what the merged archive says; `nines slo` computes attainment exactly."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from core.hdr import HdrLayout, SparseHistogram
from core.windows import SeriesKey, WindowHistogram
from monitor.report import percentile_curve
from streaming.archive import write_windows

LAYOUT = HdrLayout()


def make_archive(tmp_path: Path, t0_us: int) -> np.ndarray:
    rng = np.random.default_rng(5)
    allv = []
    windows = []
    for i in range(6):
        for p in ("0", "1", "2"):
            v = rng.lognormal(8, 1, 3000).astype(np.int64) + 1
            if i == 3 and p == "1":
                v[:20] = rng.integers(2_000_000, 6_000_000, 20)  # a stall
            allv.append(v)
            windows.append(
                WindowHistogram(
                    "10s",
                    t0_us + i * 10_000_000,
                    t0_us + (i + 1) * 10_000_000,
                    SeriesKey("c", "nines.probe", p, "e2e"),
                    SparseHistogram.from_values(LAYOUT, v),
                    lost=1 if i == 0 else 0,
                )
            )
    write_windows(tmp_path / "archive", 1, windows)
    return np.concatenate(allv)


def nines(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", *args], capture_output=True, text=True, timeout=120
    )


def test_plotted_points_match_the_merged_archive(tmp_path: Path) -> None:
    values = make_archive(tmp_path, 1_795_000_000_000_000)
    out = tmp_path / "latency.png"
    res = nines("report", "--archive", str(tmp_path / "archive"), "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = json.loads(Path(str(out) + ".json").read_text())
    (curve,) = data["curves"].values()
    assert curve["samples"] == values.size == 54_000
    exact = SparseHistogram.from_values(LAYOUT, values)
    points = dict((p, v) for p, v in curve["points"][:-1])
    for p, v in points.items():
        assert v == exact.value_at_quantile(p) / 1e6
    assert curve["points"][-1] == [1.0, values.max() / 1e6]
    # 54,000 samples support p99.99 but not p99.999
    assert max(points) >= 0.9999 and max(points) < 0.99999
    html = tmp_path / "latency.html"
    assert (
        nines(
            "report", "--archive", str(tmp_path / "archive"), "--by", "window", "--out", str(html)
        ).returncode
        == 0
    )
    assert "data:image/png;base64" in html.read_text()


def test_percentile_curve_stops_at_supported_nines() -> None:
    h = SparseHistogram.from_values(LAYOUT, range(1, 1001))
    pts = percentile_curve(h)
    assert pts[-1] == (1.0, 0.001)
    assert all(1 / (1 - p) <= 1000 for p, _ in pts[:-1])


def test_slo_attainment_against_exact(tmp_path: Path) -> None:
    now_us = int(time.time() * 1e6) - 120_000_000
    values = make_archive(tmp_path, now_us)
    sla = tmp_path / "sla.yaml"
    sla.write_text(
        yaml.safe_dump(
            {
                "windows": ["10s"],
                "objectives": [
                    {"name": "fast", "quantile": 0.999, "threshold": "1s", "window": "10s"},
                    {"name": "cap", "max": "2s", "window": "10s"},
                ],
            }
        )
    )
    res = nines("slo", "--archive", str(tmp_path / "archive"), "--sla", str(sla), "--since", "1h")
    assert res.returncode == 0, res.stderr
    fast = next(line for line in res.stdout.splitlines() if "fast" in line)
    exact_ratio = (values <= 1_000_000).mean()
    assert f"{exact_ratio:.6g}"[:5] in fast  # 1 s is a bucket boundary at 3 digits' precision
    assert "yes" in fast
    cap = next(line for line in res.stdout.splitlines() if "cap" in line)
    assert "NO" in cap and f"{values.max() / 1e6:.6g}" in cap
