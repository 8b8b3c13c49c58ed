"""Generated bad archives and bad output paths for ``nines report`` and ``nines slo``.

Each case builds a small valid archive (three batch files in one hour, windows of the last few
hours so ``nines slo``'s default 30 days reads them), then damages one file: truncated at offsets
spread over its length, replaced by random bytes, given another schema (every column dropped or
retyped), or one row's histogram made inconsistent (every check in
``streaming.archive_read.check_row``). Output-path cases damage the ``--out``/``--hlog`` path
instead.

``cases()`` lists them with ``ARCHIVE``, ``BAD`` and ``TMP`` for the paths; they are the
``archives`` source of tests/unit/bad_input_cases.py, which runs each through the real CLI
(tests/unit/test_bad_inputs.py) and publishes them in docs/configuration.md's bad-input table.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from core.hdr import HdrLayout, SparseHistogram
from core.windows import SeriesKey, WindowHistogram
from monitor.report.load import SKIP_HINT
from runtime.files import MAX_ARCHIVE_ROW_BUCKETS
from streaming.archive import write_windows
from streaming.archive_files import FILE_SCHEMA, OPTIONAL_COLUMNS
from tests.unit.archive import parquet_footer as footer

LAYOUT = HdrLayout()
HOUR_US = 3_600_000_000
SLA = str(Path(__file__).resolve().parents[3] / "examples" / "sla.yaml")
#: The file every archive case damages (the second of three batches).
BAD_BATCH = 2
BAD_ROW = 3


def archive_start_us() -> int:
    """The start of the hour two hours ago: inside ``nines slo``'s default span."""
    return (int(time.time() * 1e6) // HOUR_US - 2) * HOUR_US


def good_windows(batch: int, t0_us: int) -> list[WindowHistogram]:
    """One batch's closed windows: two 10s windows of three partitions (seeded, lognormal)."""
    rng = np.random.default_rng(batch)
    out = []
    for i in range(2):
        start = t0_us + (batch * 2 + i) * 10_000_000
        for p in ("0", "1", "2"):
            v = rng.lognormal(8, 1, 500).astype(np.int64) + 1
            out.append(
                WindowHistogram(
                    "10s",
                    start,
                    start + 10_000_000,
                    SeriesKey("c", "nines.probe", p, "e2e"),
                    SparseHistogram.from_values(LAYOUT, v),
                )
            )
    return out


def build_archive(root: Path) -> Path:
    """A valid archive of three batch files; returns the path of the one cases damage."""
    t0 = archive_start_us()
    paths = {b: write_windows(root, b, good_windows(b, t0))[0] for b in (1, BAD_BATCH, 3)}
    return paths[BAD_BATCH]


#: Damages a file and returns the reason the reader must give (it names what was changed).
Damage = Callable[[Path], str]


@dataclass(frozen=True)
class Corruption:
    """One way to damage an archive file."""

    description: str
    damage: Damage


UNREADABLE = "not a readable Parquet file (corrupt or truncated)"


def _truncate(fraction: float, delta: int) -> Damage:
    def damage(path: Path) -> str:
        data = path.read_bytes()
        path.write_bytes(data[: max(0, min(len(data) - 1, int(len(data) * fraction) + delta))])
        return UNREADABLE

    return damage


def _random_bytes(size: int, seed: int, magic: bool) -> Damage:
    def damage(path: Path) -> str:
        body = np.random.default_rng(seed).bytes(size)
        path.write_bytes(b"PAR1" + body + b"PAR1" if magic else body)
        return UNREADABLE

    return damage


def _rewrite(change: Callable[[pa.Table], pa.Table], reason: str) -> Damage:
    def damage(path: Path) -> str:
        pq.write_table(change(pq.read_table(path)), path)
        return reason

    return damage


def _other_type(t: pa.DataType) -> tuple[pa.DataType, Callable[[Any], Any]]:
    if pa.types.is_string(t):
        return pa.int64(), lambda v: len(v)
    if pa.types.is_list(t):
        return pa.int64(), lambda v: len(v)
    if pa.types.is_binary(t):
        return pa.string(), lambda v: v.hex()
    if t == pa.int32():
        return pa.int64(), lambda v: v
    return pa.string(), lambda v: str(v)


def _retype(name: str, reason: str) -> Damage:
    def change(table: pa.Table) -> pa.Table:
        new_type, convert = _other_type(table.schema.field(name).type)
        values = [convert(v) for v in table.column(name).to_pylist()]
        i = table.schema.get_field_index(name)
        return table.set_column(i, pa.field(name, new_type), pa.array(values, new_type))

    return _rewrite(change, reason)


def _edit_row(edit: Callable[[dict[str, Any]], str]) -> Damage:
    def damage(path: Path) -> str:
        table = pq.read_table(path)
        rows = table.to_pylist()
        reason = edit(rows[BAD_ROW])
        pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)
        return f"row {BAD_ROW}: {reason}"

    return damage


def _inconsistent() -> list[tuple[str, Callable[[dict[str, Any]], str]]]:
    """(description, edit returning the reason) for every way a row's arrays can disagree."""
    over = LAYOUT.overflow_index

    def longer_index(r: dict[str, Any]) -> str:
        r["bucket_index"] = [*r["bucket_index"], over]
        n = len(r["bucket_count"])
        return f"bucket_index has {n + 1} entries but bucket_count {n}"

    def longer_count(r: dict[str, Any]) -> str:
        r["bucket_count"] = [*r["bucket_count"], 1]
        n = len(r["bucket_index"])
        return f"bucket_index has {n} entries but bucket_count {n + 1}"

    def samples_off(delta: int) -> Callable[[dict[str, Any]], str]:
        def edit(r: dict[str, Any]) -> str:
            r["samples"] += delta
            return f"samples is {r['samples']} but bucket_count sums to {r['samples'] - delta}"

        return edit

    def count_set(value: int) -> Callable[[dict[str, Any]], str]:
        def edit(r: dict[str, Any]) -> str:
            r["samples"] += value - r["bucket_count"][0]
            r["bucket_count"][0] = value
            return "bucket_count holds a count <= 0"

        return edit

    def swapped(r: dict[str, Any]) -> str:
        r["bucket_index"][0], r["bucket_index"][1] = r["bucket_index"][1], r["bucket_index"][0]
        return "bucket_index is not strictly increasing"

    def repeated(r: dict[str, Any]) -> str:
        r["bucket_index"][1] = r["bucket_index"][0]
        return "bucket_index is not strictly increasing"

    def index_at(value: int) -> Callable[[dict[str, Any]], str]:
        def edit(r: dict[str, Any]) -> str:
            r["bucket_index"][-1 if value > 0 else 0] = value
            return f"bucket_index outside the layout's 0..{over}"

        return edit

    def overflow_off(r: dict[str, Any]) -> str:
        r["overflow"] = 7
        return "overflow is 7 but the overflow bucket holds 0"

    def max_at(where: str) -> Callable[[dict[str, Any]], str]:
        def edit(r: dict[str, Any]) -> str:
            top = r["bucket_index"][-1]
            low, high = int(LAYOUT.lowest_value_at(top)), int(LAYOUT.highest_value_at(top))
            r["max_us"] = high + 1 if where == "above" else low - 1
            return f"max_us {r['max_us']} is outside its highest bucket [{low}, {high}]"

        return edit

    def end_before_start(r: dict[str, Any]) -> str:
        r["window_end_us"] = r["window_start_us"]
        return "window_end_us is not after window_start_us"

    def wrong_span(r: dict[str, Any]) -> str:
        r["window_end_us"] = r["window_start_us"] + 5_000_000
        return "window spans 5000000 µs, not 10000000"

    def negative_lost(r: dict[str, Any]) -> str:
        r["lost"] = -1
        return "lost is negative (-1)"

    def null(name: str) -> Callable[[dict[str, Any]], str]:
        def edit(r: dict[str, Any]) -> str:
            r[name] = None
            return f"{name} is null"

        return edit

    def digits(r: dict[str, Any]) -> str:
        r["digits"] = 9
        return "digits must be 1..4 significant digits"

    def other_hour(r: dict[str, Any]) -> str:
        r["window_start_us"] += HOUR_US
        r["window_end_us"] += HOUR_US
        return "window starts outside its directory's hour or date"

    return [
        ("bucket_index longer than bucket_count", longer_index),
        ("bucket_count longer than bucket_index", longer_count),
        ("samples one more than the counts' sum", samples_off(1)),
        ("samples one less than the counts' sum", samples_off(-1)),
        ("a zero count", count_set(0)),
        ("a negative count", count_set(-3)),
        ("bucket indexes out of order", swapped),
        ("a repeated bucket index", repeated),
        ("a bucket index past the overflow bucket", index_at(over + 1)),
        ("a negative bucket index", index_at(-1)),
        ("overflow without samples in the overflow bucket", overflow_off),
        ("max_us above its highest bucket", max_at("above")),
        ("max_us below its highest bucket", max_at("below")),
        ("window_end_us equal to window_start_us", end_before_start),
        ("a 5s window in the 10s resolution", wrong_span),
        ("a negative lost count", negative_lost),
        ("a null samples", null("samples")),
        ("a null bucket_count", null("bucket_count")),
        ("an HDR layout of 9 digits", digits),
        ("a window of the next hour in this hour's file", other_hour),
    ]


def corruptions() -> list[Corruption]:
    """Every generated way to damage one archive file."""
    out = [
        Corruption(f"truncated at {name}", _truncate(f, d))
        for name, f, d in (
            ("0 bytes", 0.0, 0), ("1 byte", 0.0, 1), ("4 bytes (the magic)", 0.0, 4),
            ("1/4", 0.25, 0), ("1/2", 0.5, 0), ("3/4", 0.75, 0),
            ("8 bytes before the end", 1.0, -8), ("1 byte before the end", 1.0, -1),
        )
    ]  # fmt: skip
    out += [
        Corruption(f"{size} random bytes{' between PAR1 magics' if magic else ''}",
                   _random_bytes(size, seed, magic))
        for seed, (size, magic) in enumerate(((3, False), (100, False), (4096, False),
                                              (64, True), (4096, True)))
    ]  # fmt: skip
    out.append(
        Corruption(
            "a Parquet file of another dataset",
            _rewrite(
                lambda _t: pa.table({"a": [1, 2]}), "wrong schema: no column 'window_start_us'"
            ),
        )
    )
    for f in FILE_SCHEMA:
        if f.name not in OPTIONAL_COLUMNS:
            out.append(
                Corruption(
                    f"column {f.name} dropped",
                    _rewrite(
                        lambda t, n=f.name: t.drop_columns([n]),
                        f"wrong schema: no column {f.name!r}",
                    ),
                )
            )
        new_type, _ = _other_type(f.type)
        out.append(
            Corruption(
                f"column {f.name} as {new_type}",
                _retype(f.name, f"wrong schema: column {f.name!r} is {new_type}, not {f.type}"),
            )
        )
    out += [Corruption(f"row {BAD_ROW}: {d}", _edit_row(edit)) for d, edit in _inconsistent()]
    out += _oversized()
    return out


def _footer_edit(
    description: str, edit: Callable[[footer.Struct, pq.FileMetaData], str]
) -> Corruption:
    """A footer that declares what pyarrow never writes (tests/unit/archive/parquet_footer.py);
    ``edit`` changes the parsed footer and returns the reason, given the file's real metadata."""

    def damage(path: Path) -> str:
        real = pq.ParquetFile(path).metadata
        reason: list[str] = []
        footer.rewrite(path, lambda meta: reason.append(edit(meta, real)))
        return reason[0]

    return Corruption(description, damage)


def _oversized() -> list[Corruption]:
    """Files that would cost memory out of proportion: each is refused before it is decoded."""
    tib = 1 << 40
    buckets = "bucket_index.list.element"

    def chunk_values(n: int) -> Callable[[footer.Struct, pq.FileMetaData], str]:
        def edit(meta: footer.Struct, real: pq.FileMetaData) -> str:
            footer.chunks(meta)[buckets][footer.NUM_VALUES] = (footer.I64, n)
            rows, held = real.row_group(0).num_rows, real.row_group(0).column(16).num_values
            if n > rows * MAX_ARCHIVE_ROW_BUCKETS:
                return (
                    f"row group 0: {buckets} declares {n} buckets in {rows} rows, over "
                    f"{MAX_ARCHIVE_ROW_BUCKETS} a row"
                )
            return f"row group 0: {buckets}: pages hold {held} values, the footer says {n}"

        return edit

    def rows(meta: footer.Struct, real: pq.FileMetaData) -> str:
        meta[footer.ROW_GROUPS][1][1][0][footer.NUM_ROWS] = (footer.I64, tib)
        return f"row group 0: window_start_us declares {real.num_rows} values in {tib} rows"

    def pages_bytes(meta: footer.Struct, _real: pq.FileMetaData) -> str:
        footer.chunks(meta)[buckets][footer.TOTAL_UNCOMPRESSED_SIZE] = (footer.I64, 10)
        return f"row group 0: {buckets}: pages declare more than the footer's 10 bytes"

    def big_footer(path: Path) -> str:
        table = pq.read_table(path)
        pad = {b"padding": b"x" * (17 * 1024 * 1024)}
        pq.write_table(table.replace_schema_metadata(pad), path)
        size = int.from_bytes(path.read_bytes()[-8:-4], "little")
        return f"footer of {size} bytes, over its cap of 16 MiB"

    def long_label(path: Path) -> str:
        table = pq.read_table(path)
        i = table.schema.get_field_index("cluster")
        label = pa.array(["c" * (1024 * 1024)] * table.num_rows, pa.string())
        pq.write_table(table.set_column(i, "cluster", label), path)
        return f"a cluster label of {1024 * 1024} bytes, over 249"

    def many_buckets(n: int) -> Callable[[dict[str, Any]], str]:
        def edit(r: dict[str, Any]) -> str:
            r["bucket_index"] = list(range(n))
            r["bucket_count"] = [1] * n
            r["samples"], r["max_us"] = n, int(LAYOUT.highest_value_at(n - 1))
            return f"bucket_index has {n} entries, over the layout's {LAYOUT.overflow_index + 1}"

        return edit

    return [
        _footer_edit("a footer declaring 2**40 buckets", chunk_values(tib)),
        _footer_edit("a footer declaring 10 buckets over pages of more", chunk_values(10)),
        _footer_edit("a footer declaring 2**40 rows", rows),
        _footer_edit("a footer declaring fewer bytes than its pages", pages_bytes),
        Corruption("a 40 MB footer (17 MiB of schema metadata)", big_footer),
        Corruption("a 1 MiB cluster label", long_label),
        Corruption(f"row {BAD_ROW}: 30,000 buckets", _edit_row(many_buckets(30_000))),
    ]


@dataclass(frozen=True)
class Case:
    """A command run on a damaged archive or output path, and its one error line."""

    command: str
    flags: list[str]  # ARCHIVE, OUT_DIR placeholders filled in by ``argv``
    description: str
    corruption: Corruption | None
    expected: str  # ARCHIVE / BAD / TMP placeholders; "{reason}": what the damage returned

    def argv(self, archive: Path, tmp: Path) -> list[str]:
        return [
            self.command,
            *(f.replace("ARCHIVE", str(archive)).replace("TMP", str(tmp)) for f in self.flags),
        ]


def _report_flags(out: str = "TMP/plot.png") -> list[str]:
    return ["--archive", "ARCHIVE", "--out", out]


def cases() -> list[Case]:
    """Every generated case: each corruption under report and slo, then the output paths."""
    out = []
    for c in corruptions():
        expected = "archive: BAD: {reason}; " + SKIP_HINT
        out.append(Case("report", _report_flags(), c.description, c, expected))
        out.append(Case("slo", ["--archive", "ARCHIVE", "--sla", SLA], c.description, c, expected))
    missing = "directory TMP/missing does not exist"
    paths = [
        ("--out in a missing directory", "TMP/missing/plot.png", f"out: {missing}"),
        ("--out two directories deep", "TMP/a/b/plot.png", "out: directory TMP/a/b does not exist"),
        ("--out under a file", "TMP/file.txt/plot.png", "out: TMP/file.txt is not a directory"),
        ("--out is a directory", "TMP/dir.png", "out: TMP/dir.png is a directory"),
        ("--out in /sys", "/sys/plot.png", "out: cannot write in /sys: Permission denied"),
        ("--out .html in a missing directory", "TMP/missing/plot.html", f"out: {missing}"),
    ]  # fmt: skip
    for description, path, expected in paths:
        out.append(Case("report", _report_flags(path), description, None, expected))
    hlogs = [
        ("--hlog in a missing directory", "TMP/missing/w.hlog", f"hlog: {missing}"),
        ("--hlog under a file", "TMP/file.txt/w.hlog", "hlog: TMP/file.txt is not a directory"),
        ("--hlog is a directory", "TMP/dir.png", "hlog: TMP/dir.png is a directory"),
    ]  # fmt: skip
    for description, path, expected in hlogs:
        out.append(Case("report", [*_report_flags(), "--hlog", path], description, None, expected))
    return out


def prepare_paths(tmp: Path) -> None:
    """The things output-path cases point into: a file, and a directory named like an output."""
    (tmp / "file.txt").write_text("not a directory\n")
    (tmp / "dir.png").mkdir()
