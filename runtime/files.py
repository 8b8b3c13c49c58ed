"""Every file nines reads, read one way: a regular file, at most a cap of bytes, never blocking.

A path an operator gives may name anything: a FIFO (``open`` waits for a writer for ever), a
device (``/dev/zero`` never ends), a directory, or a file far larger than any config. So every
reader (configs, SLA files, web configs, ``file:`` secrets, ready files, summary files, TLS
files, the stream's own checkpoint files) goes through :func:`read_bounded`: open with
``O_NONBLOCK`` (a FIFO opens at once), ``fstat`` the open descriptor (what is read is what was
checked), refuse anything but a regular file, then read at most ``cap + 1`` bytes. A refusal is
an ``OSError`` whose ``strerror`` is the one-line reason, so the callers' existing
``cannot read PATH: {strerror}`` lines hold it. The caps (docs/configuration.md, *Input bounds*)
are far above any real file of each kind and far below what would hurt a process.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

KiB, MiB = 1024, 1024 * 1024
#: A YAML config, SLA file or web config.
MAX_CONFIG_BYTES = 1 * MiB
#: A ``file:`` secret, or a credential file (``--token-file``).
MAX_SECRET_BYTES = 64 * KiB
#: A ``nines broker`` ready file, a probe summary file, a checkpoint marker.
MAX_SMALL_BYTES = 64 * KiB
#: A PEM certificate chain, key or CA bundle of a web config.
MAX_PEM_BYTES = 1 * MiB
#: A file the stream job wrote in its own checkpoint (offset log entry, admission book).
MAX_STATE_BYTES = 64 * MiB
#: An archive's Parquet file: above an hour's compacted windows of 12,000 series (the series cap).
MAX_ARCHIVE_FILE_BYTES = 16 * 1024 * MiB
#: An archive file's footer (its Parquet metadata), as its last 8 bytes declare it, checked
#: before it is parsed; the writer's footers take about 2 KiB per row group (``streaming.archive``).
MAX_ARCHIVE_FOOTER_BYTES = 16 * MiB
#: One page of an archive file, uncompressed, as its header declares it: pyarrow decodes a page
#: whole (the writer's are ~1 MiB, pyarrow's default). With rows read a few at a time this, not
#: a row group's or a column chunk's size, bounds what a read decodes, so a row group of any size
#: (the writer's before bounded row groups held up to 1 Mi rows) is read in bounded memory.
MAX_ARCHIVE_PAGE_BYTES = 64 * MiB
#: A row's bucket arrays: the widest ``core.hdr.HdrLayout`` (4 digits, 1 µs to 2**63 - 1 µs)
#: has 819,201 buckets (overflow included); a row's own layout bounds it further.
MAX_ARCHIVE_ROW_BUCKETS = 819_201
#: A dictionary-read column (``hdr``) of one batch, expanded.
MAX_ARCHIVE_EXPANDED_BYTES = 256 * MiB
#: Buckets (per bucket column) the archive reader decodes at once, and the most the writer puts
#: in one row group: a read's working memory beyond the windows it returns is one such batch.
ARCHIVE_BATCH_VALUES = 1 * MiB
#: Rows the archive reader converts at once, and the most the writer puts in one row group.
ARCHIVE_BATCH_ROWS = 8 * KiB

_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


class RefusedFile(OSError):
    """A path that is no regular file, or a file over its cap; ``strerror`` says which."""


def size_text(n_bytes: int) -> str:
    """``n_bytes`` as the docs write a cap: ``64 KiB``, ``1 MiB``."""
    for unit, size in (("GiB", 1024 * MiB), ("MiB", MiB), ("KiB", KiB)):
        if n_bytes >= size and n_bytes % size == 0:
            return f"{n_bytes // size} {unit}"
    return f"{n_bytes} bytes"


def open_regular(path: str | Path, cap_bytes: int) -> int:
    """A read-only descriptor of ``path``, checked to be a regular file of at most ``cap_bytes``;
    never blocks (``O_NONBLOCK``: a FIFO opens at once, and is then refused)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(info.st_mode):
            kind = _KINDS.get(stat.S_IFMT(info.st_mode), "not a file")
            raise RefusedFile(errno.EINVAL, f"not a regular file ({kind})", str(path))
        if info.st_size > cap_bytes:
            raise _too_large(path, cap_bytes)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _too_large(path: str | Path, cap_bytes: int) -> RefusedFile:
    return RefusedFile(errno.EFBIG, f"larger than its cap of {size_text(cap_bytes)}", str(path))


def read_bounded(path: str | Path, cap_bytes: int) -> bytes:
    """The bytes of the regular file at ``path``; ``RefusedFile`` (an OSError) past ``cap_bytes``
    (read to ``cap + 1``: a file that grows after the ``fstat`` is caught too)."""
    fd = open_regular(path, cap_bytes)
    try:
        chunks, got = [], 0
        while got <= cap_bytes:
            chunk = os.read(fd, min(cap_bytes + 1 - got, 1 * MiB))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    finally:
        os.close(fd)
    if got > cap_bytes:
        raise _too_large(path, cap_bytes)
    return b"".join(chunks)


def read_text_bounded(path: str | Path, cap_bytes: int) -> str:
    """The UTF-8 text of the regular file at ``path`` (:func:`read_bounded`; UnicodeDecodeError
    as ``bytes.decode`` raises it)."""
    return read_bounded(path, cap_bytes).decode("utf-8")
