"""The series cap of Spark's state: which (cluster, topic, partition) series a read task admits.

Series come from record content, so a writer to the echo topic could otherwise fill the state
with as many series as it likes until their (up to 1 h) windows close. The cap must be
deterministic across replays (a killed job replays its last batch with the same offsets and must
build the same state), so every decision is a function of what the checkpoint holds when the
batch is planned and of the batch's own records, never of timing:

* The **book** (``<checkpoint>/nines-series/``) holds, per batch id N, ``known-N.json``: the
  series admitted before batch N, each with the last event time seen. The driver writes it when
  it plans batch N (``plan``) from the previous book and what batch N-1's tasks saw, drops the
  series whose coarsest window has closed (their state rows are gone), and reuses it as it is
  when Spark replays batch N.
* A read task admits every row of a known series; a new series only within its Kafka range's
  quota (``quotas``: the free places split over the batch's ranges), first by offset. Rows of a
  refused series become ``bad`` rows with reason ``series_cap``: counted, never silently dropped.
* Each task writes what its ranges admitted (``seen-N/<partition>.json``) for batch N+1's plan.

The book lives on the checkpoint's filesystem, which the driver and every executor share (the
job already reads the offset log through it).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.windows import window_end_us
from runtime.disk import atomic_write
from runtime.files import MAX_STATE_BYTES, read_text_bounded
from streaming import grouping

#: Series = (cluster, topic, partition); a hiccup's partition (none) is written -1.
Series = tuple[str, str, int]
#: Row types that carry a series; bad rows and vanished offsets carry none of their own.
SUBJECT_RTYPES = ("echo", "hiccup", "late")
#: The bad reason of a record whose new series the cap refused.
SERIES_CAP = "series_cap"
BOOK_DIR = "nines-series"
NO_PARTITION = -1


def quotas(partitions: list[int], free: int, batch_id: int) -> dict[int, int]:
    """New series each Kafka range of a batch may admit: ``free`` split as evenly as possible.

    The ranges that get one more than the others rotate with the batch id, so near the cap no
    Kafka partition is starved for good.
    """
    n = len(partitions)
    if n == 0:
        return {}
    base, extra = divmod(max(free, 0), n)
    ordered = sorted(partitions)
    return {p: base + (1 if (i - batch_id) % n < extra else 0) for i, p in enumerate(ordered)}


def _write_json(path: Path, data: object) -> None:
    """Write atomically: a replay or a retried task rewrites the same file in one step (a
    full disk leaves no temporary file)."""
    with atomic_write(path) as tmp:
        tmp.write_text(json.dumps(data, separators=(",", ":")))


def _load_series(path: Path) -> dict[Series, int]:
    text = read_text_bounded(path, MAX_STATE_BYTES)
    return {(c, t, p): last for c, t, p, last in json.loads(text)}


def _dump_series(series: dict[Series, int]) -> list[list[object]]:
    return [[c, t, p, last] for (c, t, p), last in sorted(series.items())]


def _ids(book: Path, prefix: str) -> list[int]:
    return sorted(
        int(p.name.removeprefix(prefix).removesuffix(".json"))
        for p in book.glob(f"{prefix}*")
        if p.name.removeprefix(prefix).removesuffix(".json").isdigit()
    )


@dataclass(frozen=True)
class SeriesPlan:
    """What one batch's tasks need: the book, the batch id, and each range's quota."""

    book: str
    batch_id: int
    quotas: dict[int, int]

    def known_path(self) -> Path:
        """The batch's known series (written by ``plan``)."""
        return Path(self.book) / f"known-{self.batch_id}.json"

    def seen_path(self, partition: int) -> Path:
        """What the task reading ``partition`` in this batch admitted."""
        return Path(self.book) / f"seen-{self.batch_id}" / f"{partition}.json"


def plan(
    checkpoint: str,
    batch_id: int,
    watermark_us: int,
    coarsest_us: int,
    max_series: int,
    partitions: list[int],
) -> SeriesPlan:
    """The book for batch ``batch_id`` (reused on a replay) and the quotas of its ranges.

    Runs on the driver when Spark plans the batch: every earlier batch has completed, so their
    tasks' ``seen`` files are all written.
    """
    book = Path(checkpoint) / BOOK_DIR
    book.mkdir(parents=True, exist_ok=True)
    path = book / f"known-{batch_id}.json"
    if path.exists():
        known = _load_series(path)
    else:
        earlier = [i for i in _ids(book, "known-") if i < batch_id]
        known = _load_series(book / f"known-{earlier[-1]}.json") if earlier else {}
        since = earlier[-1] if earlier else -1
        for i in (i for i in _ids(book, "seen-") if since <= i < batch_id):
            for f in sorted((book / f"seen-{i}").glob("*.json")):
                for s, last in _load_series(f).items():
                    known[s] = max(known.get(s, last), last)
        # a series whose coarsest window has closed has no rows left in Spark's state
        known = {s: t for s, t in known.items() if window_end_us(t, coarsest_us) > watermark_us}
        _write_json(path, _dump_series(known))
        for i in _ids(book, "known-"):
            if i < batch_id:
                (book / f"known-{i}.json").unlink(missing_ok=True)
        for i in _ids(book, "seen-"):
            if i < batch_id:
                shutil.rmtree(book / f"seen-{i}", ignore_errors=True)
    return SeriesPlan(str(book), batch_id, quotas(partitions, max_series - len(known), batch_id))


_KNOWN_CACHE: dict[tuple[str, int, int], frozenset[Series]] = {}


def known_series(plan_: SeriesPlan) -> frozenset[Series]:
    """The batch's known series; a worker process reuses the last book it read (each task of a
    batch reads the same one) unless the file changed (a checkpoint deleted and started anew)."""
    path = plan_.known_path()
    st = path.stat()
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _KNOWN_CACHE:
        _KNOWN_CACHE.clear()
        _KNOWN_CACHE[key] = frozenset(_load_series(path))
    return _KNOWN_CACHE[key]


@dataclass
class RangeAdmission:
    """One Kafka range's admissions in a read task: its quota left and what it admitted."""

    quota: int
    new: set[Series] = field(default_factory=set)
    seen: dict[Series, int] = field(default_factory=dict)


#: A (Kafka range, series)'s fate in a task: not met yet, admitted, refused.
UNDECIDED, ADMITTED, REFUSED = 0, 1, 2
_NEVER = np.iinfo(np.int64).min


class TaskAdmission:
    """The admission of one read task's ranges; ``admit`` each parsed batch, then ``save``."""

    def __init__(self, plan_: SeriesPlan, partitions: Iterable[int]) -> None:
        self.plan = plan_
        self.known = known_series(plan_)
        self.ranges = {p: RangeAdmission(plan_.quotas.get(p, 0)) for p in partitions}
        #: Each (Kafka range, series) met so far gets a number, and by it its fate and latest
        #: event time: a fetch's groups are decided in Python only the first time they come.
        self._number: dict[tuple[int, Series], int] = {}
        self._fate = np.zeros(0, np.int8)
        self._last = np.zeros(0, np.int64)

    def admit(
        self, rows: pa.RecordBatch, kafka_partitions: np.ndarray, watermark_us: int
    ) -> pa.RecordBatch:
        """``rows`` (the source's schema) with every row of a refused series made ``bad``.

        Decisions go series by series in the order of their first row, so within a Kafka
        range they follow the offsets, whatever the consumer's fetch sizes.
        """
        rtype = rows.column("rtype")
        if pc.all(pc.equal(rtype, "echo")).as_py():  # nearly every fetch: no string lookup
            idx = np.arange(rows.num_rows)
        else:
            subject = pc.is_in(rtype, pa.array(SUBJECT_RTYPES))
            idx = np.flatnonzero(np.asarray(subject.to_numpy(zero_copy_only=False), bool))
        if not len(idx):
            return rows
        whole = len(idx) == rows.num_rows

        def column(name: str) -> pa.Array:
            return rows.column(name) if whole else rows.column(name).take(idx)

        cluster, topic = column("cluster"), column("topic")
        partition = pc.fill_null(column("partition"), NO_PARTITION)
        # one code per (Kafka range, series), numbered without hashing every row where a label
        # is the same in every row (a fetch of one probe)
        limit = 4 * len(idx) + 1
        parts = [
            grouping.int_codes(np.asarray(kafka_partitions, np.int64)[idx], limit),
            grouping.codes(cluster),
            grouping.codes(topic),
            grouping.int_codes(
                np.asarray(partition.to_numpy(zero_copy_only=False), np.int64), limit
            ),
        ]
        keyed = grouping.key(parts)
        assert keyed is not None  # renumbered as it grows: at most the rows' count squared
        group, count = keyed
        first = np.full(count, len(idx), np.int64)
        np.minimum.at(first, group, np.arange(len(idx)))
        event = np.asarray(column("event_us").to_numpy(zero_copy_only=False), np.int64)
        last = np.full(count, np.iinfo(np.int64).min, np.int64)
        np.maximum.at(last, group, event)
        order = np.argsort(first, kind="stable")  # series in the order of their first row
        order = order[: np.count_nonzero(first < len(idx))]  # codes no row has go last
        at = first[order]
        ks = np.asarray(kafka_partitions)[idx[at]].tolist()
        cs = cluster.take(pa.array(at)).to_pylist()
        ts = topic.take(pa.array(at)).to_pylist()
        ps = partition.take(pa.array(at)).to_pylist()
        keys = list(zip(ks, zip(cs, ts, ps, strict=True), strict=True))
        number = self._number
        ids = np.array([number.setdefault(key, len(number)) for key in keys], np.int64)
        self._grow(len(number))
        for j in np.flatnonzero(self._fate[ids] == UNDECIDED).tolist():  # first met in this task
            k, series = keys[j]
            r = self.ranges[k]
            fate = ADMITTED
            if series not in self.known and series not in r.new:
                if r.quota > 0:
                    r.quota -= 1
                    r.new.add(series)
                else:
                    fate = REFUSED
            self._fate[ids[j]] = fate
        fates = self._fate[ids]
        ok = ids[fates == ADMITTED]
        self._last[ok] = np.maximum(self._last[ok], last[order][fates == ADMITTED])
        if not (fates == REFUSED).any():
            return rows
        refused = np.zeros(count, bool)
        refused[order[fates == REFUSED]] = True
        mask = np.zeros(rows.num_rows, dtype=bool)
        mask[idx[refused[group]]] = True
        return refuse(rows, pa.array(mask), watermark_us)

    def _grow(self, n: int) -> None:
        if n > len(self._fate):
            more = max(n, 2 * len(self._fate)) - len(self._fate)
            self._fate = np.concatenate([self._fate, np.full(more, UNDECIDED, np.int8)])
            self._last = np.concatenate([self._last, np.full(more, _NEVER, np.int64)])

    def save(self) -> None:
        """What each range admitted, for the next batch's plan (rewritten alike on a replay)."""
        for (k, series), i in self._number.items():
            if self._fate[i] == ADMITTED:
                self.ranges[k].seen[series] = int(self._last[i])
        for p, r in self.ranges.items():
            path = self.plan.seen_path(p)
            path.parent.mkdir(parents=True, exist_ok=True)
            _write_json(path, _dump_series(r.seen))


def refuse(rows: pa.RecordBatch, mask: pa.Array, watermark_us: int) -> pa.RecordBatch:
    """Rows under ``mask`` become ``bad``/``series_cap`` with no series, at the watermark like
    every bad row (so a refused writer's clock never moves it)."""
    fill = {
        "rtype": pa.scalar("bad"),
        "reason": pa.scalar(SERIES_CAP),
        "event_us": pa.scalar(watermark_us, pa.int64()),
    }
    cols = [
        c if n == "n" else pc.if_else(mask, fill.get(n, pa.scalar(None, c.type)), c)
        for n, c in zip(rows.schema.names, rows.columns, strict=True)
    ]
    return pa.RecordBatch.from_arrays(cols, schema=rows.schema)
