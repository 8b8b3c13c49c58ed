"""Report files: the PNG (with its points as FILE.png.json) and the self-contained HTML page.

Drawing and writing only; every number on the page comes from :mod:`monitor.report.curves`.
"""

from __future__ import annotations

import base64
import html
import json
import warnings
from pathlib import Path
from typing import Any

from core.printable import printable
from core.windows import WindowHistogram
from monitor.report.curves import MIN_X_MAX, curve_data, x_positions, x_ticks
from runtime.disk import atomic_write


def write_plot(curves: dict[str, WindowHistogram], out: Path, title: str) -> dict[str, Any]:
    """Write the PNG (and FILE.png.json with the plotted points), each whole or not at all;
    return the points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = curve_data(curves, title)
    fig, ax = plt.subplots(figsize=(10, 6), dpi=110)
    x_max_tick = MIN_X_MAX
    for label, curve in data["curves"].items():
        pts = curve["points"]
        xs, max_x = x_positions(pts)
        x_max_tick = max(x_max_tick, max_x)
        ys = [max(v, 1e-6) for _, v in pts]
        shown = f"{printable(label)} (n={curve['samples']:,})"
        (line,) = ax.plot(xs[:-1], ys[:-1], label=shown, linewidth=1.6)
        ax.scatter([xs[-1]], [ys[-1]], marker="^", s=40, color=line.get_color())
        ax.annotate(
            f"max {pts[-1][1] * 1e3:.1f} ms",
            (xs[-1], ys[-1]),
            fontsize=7,
            textcoords="offset points",
            xytext=(4, 4),
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ticks = x_ticks(x_max_tick)
    ax.set_xticks([t for t, _ in ticks], [n for _, n in ticks])
    ax.set_xlabel("percentile (1/(1-p) scale); ▲ = max")
    ax.set_ylabel("latency (seconds)")
    ax.set_title(printable(title))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    with warnings.catch_warnings():
        # a glyph the font lacks (a label in another script) is drawn as a box, not a warning
        warnings.filterwarnings("ignore", message="Glyph .* missing from", category=UserWarning)
        fig.tight_layout()
        try:
            with atomic_write(out) as tmp:
                fig.savefig(tmp, format="png")
        finally:
            plt.close(fig)
    with atomic_write(str(out) + ".json") as tmp:
        tmp.write_text(json.dumps(data, indent=1))
    return data


def write_html(curves: dict[str, WindowHistogram], out: Path, title: str) -> None:
    """A self-contained page: the plot inline and a quantile table per curve."""
    png = out.with_suffix(".png")
    data = write_plot(curves, png, title)
    img = base64.b64encode(png.read_bytes()).decode()
    rows = []
    for label, c in data["curves"].items():
        cells = "".join(f"<td>{v * 1e3:.3f}</td>" for _, v in c["points"])
        shown = html.escape(printable(label))
        rows.append(f"<tr><th>{shown}</th><td>{c['samples']:,}</td>{cells}</tr>")
    heads = "".join(
        f"<th>{'max' if p >= 1 else f'p{p * 100:.6g}'}</th>"
        for p, _ in next(iter(data["curves"].values()))["points"]
    )
    title = html.escape(printable(title))
    page = (
        f"<!doctype html><meta charset=utf-8><title>{title}</title>"
        f"<h1>{title}</h1><img src='data:image/png;base64,{img}'>"
        f"<p>Latency in ms, read from merged HDR histograms.</p>"
        f"<table border=1><tr><th>series</th><th>samples</th>{heads}</tr>{''.join(rows)}</table>"
    )
    with atomic_write(out) as tmp:
        tmp.write_text(page)
