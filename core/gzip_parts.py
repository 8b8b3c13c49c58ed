"""gzip of a body made of parts, each large part deflated once for as long as it is the same object.

The exporter's /metrics body is mostly per-resolution chunks that stay the same ``bytes`` until a
window of their resolution closes: after a batch of 10 s windows, the 1 m and 1 h chunks (two
thirds of the body) are unchanged. Compressing the whole body again on every change made the
compression level a trade of bytes for CPU (docs/benchmarks.md, figures the code cites).
Here each part of at least ``MIN_CACHED_BYTES`` is deflated on its own (a raw deflate stream
ended by a sync flush, so the next one starts on a byte boundary) and kept while the next body
holds the same object; smaller parts between them are deflated together each time. The gzip
member is the header, the parts' deflate streams in order, an empty final block, and the CRC-32
and length of the whole: one ordinary gzip member (as pigz writes), which every client reads,
unlike concatenated gzip members. Each part starts without its predecessor's history, which costs
nothing measurable at parts of megabytes.

A part known before the body that will hold it (a resolution's chunk encoded when its windows
closed, ahead of the scrape) can be deflated ahead too (``prime``): the next body that holds the
same object takes its stream, as it takes a kept part's.
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Iterator, Sequence
from typing import Final

#: Parts at least this large are deflated alone and their deflate stream kept.
MIN_CACHED_BYTES: Final = 64 * 1024
#: A gzip header: deflate, no flags, no mtime (the same body compresses to the same bytes).
_HEADER: Final = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
#: An empty final block (what ``flush(Z_FINISH)`` writes for no input).
_FINAL: Final = zlib.compressobj(wbits=-15).flush(zlib.Z_FINISH)


def deflate(data: bytes, level: int) -> bytes:
    """``data`` as a raw deflate stream that ends on a byte boundary and is not final."""
    packer = zlib.compressobj(level, zlib.DEFLATED, -15)
    return packer.compress(data) + packer.flush(zlib.Z_SYNC_FLUSH)


def _segments(parts: Sequence[bytes]) -> Iterator[tuple[bytes, bool]]:
    """(segment, kept): each large part alone and kept; the runs of small parts joined."""
    run: list[bytes] = []
    for part in parts:
        if len(part) >= MIN_CACHED_BYTES:
            if run:
                yield b"".join(run), False
                run = []
            yield part, True
        elif part:
            run.append(part)
    if run:
        yield b"".join(run), False


class PartsGzip:
    """Compresses successive bodies of one format; thread-safe (one compression at a time, so a
    second scraper of the same body waits and gets the first one's result)."""

    def __init__(self, level: int) -> None:
        self.level = level
        self._lock = threading.Lock()
        #: id of a kept part → (that part, its deflate stream): the last body's large parts
        self._kept: dict[int, tuple[bytes, bytes]] = {}
        #: the last body's parts (the same object again: the same gzip) and its gzip
        self._last: tuple[bytes | Sequence[bytes], bytes] | None = None
        #: id of a primed part → (that part, its deflate stream): deflated ahead of its body
        #: (``prime``), until a body takes it or the next ``prime`` leaves it out
        self._primed: dict[int, tuple[bytes, bytes]] = {}
        #: bodies compressed so far (a compressor never used is not worth priming)
        self.compressions = 0
        #: bytes deflated so far, and of those, in kept parts reused (tests read them)
        self.deflated_bytes = 0
        self.reused_bytes = 0
        #: of the bytes deflated, those deflated ahead of their body (``prime``)
        self.primed_bytes = 0

    def compress(self, body: bytes | Sequence[bytes]) -> bytes:
        """The gzip of ``body``, or of its parts joined (the same object as last time: the
        same gzip, compressed once however many scrapers ask)."""
        with self._lock:
            if self._last is not None and self._last[0] is body:
                return self._last[1]
            parts = (body,) if isinstance(body, bytes) else body
            out = [_HEADER]
            crc = size = 0
            kept: dict[int, tuple[bytes, bytes]] = {}
            for segment, keep in _segments(parts):
                entry = self._kept.get(id(segment)) if keep else None
                if keep and (entry is None or entry[0] is not segment):
                    entry = self._primed.get(id(segment))
                    if entry is not None and entry[0] is segment:
                        del self._primed[id(segment)]
                if entry is not None and entry[0] is segment:
                    self.reused_bytes += len(segment)
                else:
                    entry = (segment, deflate(segment, self.level))
                    self.deflated_bytes += len(segment)
                if keep:
                    kept[id(segment)] = entry
                out.append(entry[1])
                crc = zlib.crc32(segment, crc)
                size += len(segment)
            out += [_FINAL, struct.pack("<II", crc, size & 0xFFFFFFFF)]
            packed = b"".join(out)
            self._kept = kept
            self._last = (body, packed)
            self.compressions += 1
            return packed

    def prime(self, parts: Sequence[bytes]) -> int:
        """Deflate the large ones of ``parts`` now, for a later body that holds the same objects
        (parts already kept or primed are not deflated again); primed parts that ``parts`` leaves
        out are let go, so what is held stays one set of parts. Returns the bytes deflated.

        Holds the compressor while it works: a body compressed meanwhile waits, then takes the
        streams rather than deflating the same parts a second time."""
        with self._lock:
            primed: dict[int, tuple[bytes, bytes]] = {}
            deflated = 0
            for part in parts:
                if len(part) < MIN_CACHED_BYTES:
                    continue  # deflated with its neighbours, in the body
                kept = self._kept.get(id(part))
                if kept is not None and kept[0] is part:
                    continue
                entry = self._primed.get(id(part))
                if entry is None or entry[0] is not part:
                    entry = (part, deflate(part, self.level))
                    deflated += len(part)
                primed[id(part)] = entry
            self._primed = primed
            self.deflated_bytes += deflated
            self.primed_bytes += deflated
            return deflated
