"""The archive's lifecycle: hour partitions, compaction that never loses or doubles a window,
retention by whole dates, reads that choose files by path, and bad files named, never raised as
anything but ArchiveError."""

from __future__ import annotations

import random
import shutil
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from core.hdr import HdrLayout, SparseHistogram
from core.windows import SeriesKey, WindowHistogram
from streaming import archive as arc
from streaming import archive_read
from streaming.archive import ArchiveWriter, compact_dir, prune, write_windows
from streaming.archive_files import ArchiveError, hour_dir, select_files
from streaming.archive_read import scan_windows
from testkit.archive import read_windows

LAYOUT = HdrLayout()
HOUR = 3_600_000_000
T0 = 1_795_000_000_000_000 // HOUR * HOUR  # an hour boundary
SPAN = 10_000_000


def batch(b: int, per_batch: int = 1, parts: int = 2) -> list[WindowHistogram]:
    """Batch ``b`` closes ``per_batch`` consecutive 10s windows (seeded contents)."""
    rng = np.random.default_rng(b)
    out = []
    for k in range(per_batch):
        start = T0 + (b * per_batch + k) * SPAN
        for p in range(parts):
            v = rng.lognormal(8, 1, 50).astype(np.int64) + 1
            out.append(
                WindowHistogram(
                    "10s", start, start + SPAN, SeriesKey("c", "t", str(p), "e2e"),
                    SparseHistogram.from_values(LAYOUT, v), lost=b % 3,
                )
            )  # fmt: skip
    return out


def key(w: WindowHistogram) -> tuple[object, ...]:
    return (*w.sort_key, w.hist.index.tobytes(), w.hist.count.tobytes(), w.hist.max_us, w.lost)


def files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_rows_land_in_hour_partitions_and_reads_choose_them_by_path(tmp_path: Path) -> None:
    # 720 windows of 10s = 2 hours, written as 360 batches of two windows each
    for b in range(360):
        write_windows(tmp_path, b, batch(b, per_batch=2))
    hours = sorted({p.parent.name for p in tmp_path.rglob("*.parquet")})
    assert hours == [
        hour_dir(tmp_path, "10s", T0).name,
        hour_dir(tmp_path, "10s", T0 + HOUR).name,
    ]
    # a corrupt file in the second hour is never opened by a read of the first
    second = hour_dir(tmp_path, "10s", T0 + HOUR)
    (second / "batch-999999999.parquet").write_bytes(b"garbage")
    first = read_windows(tmp_path, "10s", T0, T0 + HOUR)
    assert len(first) == 360 * 2 and all(w.window_start_us < T0 + HOUR for w in first)
    # a window starting just before the span still overlaps it and is read
    edge = read_windows(tmp_path, "10s", T0 + HOUR - 1, T0 + HOUR)
    assert [w.window_start_us for w in edge] == [T0 + HOUR - SPAN] * 2
    with pytest.raises(ArchiveError, match=r"batch-999999999\.parquet: not a readable Parquet"):
        read_windows(tmp_path, "10s", T0 + HOUR, T0 + 2 * HOUR)


def test_writer_compacts_closed_hours_and_reads_every_window_once(tmp_path: Path) -> None:
    writer = ArchiveWriter(tmp_path, retention_s=10**9)
    written = []
    for b in range(400):  # 400 windows of 10s: hour 0 closes, hour 1 is open
        ws = batch(b)
        written += ws
        writer.write(b, ws, now_s=T0 / 1e6)
    h0 = hour_dir(tmp_path, "10s", T0)
    h1 = hour_dir(tmp_path, "10s", T0 + HOUR)
    assert [p.name for p in h0.iterdir()] == ["compact-000000000-000000359.parquet"]
    assert len(list(h1.iterdir())) == 40  # still open: one file per batch
    back = read_windows(tmp_path)
    assert sorted(map(key, back)) == sorted(map(key, written))


def test_a_crash_between_the_compacted_file_and_removing_inputs_reads_once(
    tmp_path: Path,
) -> None:
    for b in range(30):
        write_windows(tmp_path, b, batch(b))
    h0 = hour_dir(tmp_path, "10s", T0)
    saved = tmp_path.parent / "saved"
    shutil.copytree(h0, saved)
    expected = sorted(map(key, read_windows(tmp_path)))
    compact_dir(h0)
    for p in saved.iterdir():  # the inputs, as if the process died before unlinking them
        shutil.copy(p, h0 / p.name)
    (h0 / "compact-000000000-000000040.parquet.tmp").write_bytes(b"half a file")  # a later one
    assert len(list(h0.iterdir())) == 32
    assert sorted(map(key, read_windows(tmp_path))) == expected
    # a replay of a compacted batch rewrites its file identically: still read once
    write_windows(tmp_path, 12, batch(12))
    assert sorted(map(key, read_windows(tmp_path))) == expected
    # and a later window in the same hour (batch 30) joins on the next compaction
    write_windows(tmp_path, 30, batch(30))
    out = compact_dir(h0)
    assert out is not None and out.name == "compact-000000000-000000030.parquet"
    assert [p.name for p in h0.iterdir()] == [out.name]
    assert len(read_windows(tmp_path)) == len(expected) + 2


def test_a_crash_while_writing_the_compacted_file_leaves_the_inputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for b in range(10):
        write_windows(tmp_path, b, batch(b))
    expected = sorted(map(key, read_windows(tmp_path)))
    h0 = hour_dir(tmp_path, "10s", T0)

    def die(*_a: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(arc.os, "replace", die)
    with pytest.raises(OSError):
        compact_dir(h0)
    assert sorted(map(key, read_windows(tmp_path))) == expected
    monkeypatch.undo()
    compact_dir(h0)  # the next try finishes it and removes the stale .tmp
    assert [p.name for p in h0.iterdir()] == ["compact-000000000-000000009.parquet"]
    assert sorted(map(key, read_windows(tmp_path))) == expected


def test_a_read_racing_a_compaction_plans_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for b in range(10):
        write_windows(tmp_path, b, batch(b))
    expected = sorted(map(key, read_windows(tmp_path)))
    h0 = hour_dir(tmp_path, "10s", T0)
    real = archive_read.file_windows
    calls = Counter[str]()

    def compacting_first(path: Path, *a: object) -> list[WindowHistogram]:
        calls["rows"] += 1
        if calls["rows"] == 2:  # after the first file, the stream job compacts the hour
            compact_dir(h0)
        return real(path, *a)  # type: ignore[arg-type]

    monkeypatch.setattr(archive_read, "file_windows", compacting_first)
    assert sorted(map(key, read_windows(tmp_path))) == expected


def test_select_files_reads_each_batch_once_whatever_a_crash_left() -> None:
    rng = random.Random(7)
    for _ in range(500):
        ids = sorted(rng.sample(range(60), rng.randint(1, 20)))
        # compactions happen in order; each covers everything before it, so ranges nest
        cuts = sorted(rng.sample(ids, rng.randint(0, min(3, len(ids)))))
        names = {f"batch-{i:09d}.parquet" for i in ids}
        first = ids[0]
        for cut in cuts:
            names.add(f"compact-{first:09d}-{cut:09d}.parquet")
            # a crash may keep or drop each input the compaction covered
            names -= {n for n in names if n.startswith("batch-") and rng.random() < 0.5
                      and first <= int(n[6:15]) <= cut}  # fmt: skip
        chosen = select_files([*sorted(names), "batch-000000001.parquet.tmp", "notes.txt"])
        covered: list[int] = []
        for n in chosen:
            if n.startswith("compact-"):
                a, b = int(n[8:17]), int(n[18:27])
                covered += [i for i in ids if a <= i <= b]
            else:
                covered.append(int(n[6:15]))
        assert sorted(covered) == ids, (sorted(names), chosen)
    with pytest.raises(ArchiveError, match="overlaps"):
        select_files(["compact-000000000-000000010.parquet", "compact-000000005-000000020.parquet"])


def test_prune_removes_whole_dates_past_the_retention(tmp_path: Path) -> None:
    day = 86_400_000_000
    for d in range(5):
        write_windows(tmp_path, d, [replace_start(w, T0 + d * day) for w in batch(0)])
    dates = lambda: sorted(p.name for p in (tmp_path / "resolution=10s").iterdir())  # noqa: E731
    assert len(dates()) == 5
    now = T0 + 4 * day + HOUR
    removed = prune(tmp_path, now, retention_s=2 * 86_400)
    # a date goes once all of it is older than the retention
    assert len(removed) == 2 and len(dates()) == 3
    assert all(w.window_start_us >= T0 + 2 * day for w in read_windows(tmp_path))


def replace_start(w: WindowHistogram, start: int) -> WindowHistogram:
    return replace(w, window_start_us=start, window_end_us=start + SPAN)


def test_files_written_before_hour_partitions_are_still_read(tmp_path: Path) -> None:
    paths = write_windows(tmp_path, 5, batch(5))
    legacy = paths[0].parent.parent / paths[0].name  # date=…/batch-….parquet
    paths[0].rename(legacy)
    paths[0].parent.rmdir()
    assert sorted(map(key, read_windows(tmp_path))) == sorted(map(key, batch(5)))


@pytest.mark.parametrize("seed", range(60))
def test_flipped_bytes_are_read_or_named_never_a_traceback(tmp_path: Path, seed: int) -> None:
    (path,) = write_windows(tmp_path, 1, batch(1, per_batch=3, parts=3))
    data = bytearray(path.read_bytes())
    rng = random.Random(seed)
    for _ in range(rng.randint(1, 8)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    path.write_bytes(bytes(data))
    try:
        got = scan_windows(tmp_path, skip_bad=True)
    except ArchiveError as exc:  # pragma: no cover - skip_bad never raises for a file
        raise AssertionError(exc) from None
    assert got.windows or [str(e.path) for e in got.bad] == [str(path)]
    for w in got.windows:  # whatever was read passed every consistency check
        assert (
            w.hist.total == int(w.hist.count.sum()) and w.window_end_us - w.window_start_us == SPAN
        )


def test_prune_by_size_removes_the_oldest_whole_dates_never_today(tmp_path: Path) -> None:
    day = 86_400_000_000
    for d in range(4):
        for res in ("10s", "1m"):
            ws = [replace_start(w, T0 + d * day) for w in batch(d)]
            write_windows(tmp_path, d, [replace(w, resolution=res) for w in ws])
    per_date = {
        p.name: sum(f.stat().st_size for f in p.rglob("*.parquet"))
        for p in (tmp_path / "resolution=10s").iterdir()
    }
    total = sum(f.stat().st_size for f in tmp_path.rglob("*.parquet"))
    now = T0 + 3 * day + HOUR  # the fourth date is today
    # room for a bit more than two dates: the two oldest go, at every resolution
    cap = total - sum(sorted(per_date.values())[:2]) * 2 + 10
    removed = prune(tmp_path, now, retention_s=10**9, max_bytes=cap)
    assert len(removed) == 4 and {p.name for p in removed} == set(sorted(per_date)[:2])
    left = {p.name for p in tmp_path.glob("resolution=*/date=*")}
    assert left == set(sorted(per_date)[2:])
    assert sum(f.stat().st_size for f in tmp_path.rglob("*.parquet")) <= cap
    prune(tmp_path, now, retention_s=10**9, max_bytes=1)  # even a tiny cap keeps today
    assert {p.name for p in tmp_path.glob("resolution=*/date=*")} == set(sorted(per_date)[3:])


def test_compaction_leaves_files_it_did_not_write(tmp_path: Path) -> None:
    for b in range(3):
        write_windows(tmp_path, b, batch(b))
    h0 = hour_dir(tmp_path, "10s", T0)
    (h0 / "notes.parquet").write_bytes(b"someone else's")
    (h0 / "README").write_text("hands off\n")
    compact_dir(h0)
    names = sorted(p.name for p in h0.iterdir())
    assert names == ["README", "compact-000000000-000000002.parquet", "notes.parquet"]
    assert len(read_windows(tmp_path)) == 6  # the foreign files are never read either
