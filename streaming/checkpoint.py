"""The checkpoint and archive directories, checked before Spark starts.

Spark finds a damaged log only once its JVM runs (a minute on a loaded 2-core machine), then
fails with dozens of Java frames; an unwritable directory was a Python traceback. Here each is
one ``ConfigError`` naming the field, in milliseconds: the directory is made and written to,
and Spark's own logs (``metadata``, ``offsets/N``, ``commits/N``) are read as Spark reads them,
Hadoop's ``.NAME.crc`` checksums included. Whose checkpoint it is (state format, windows, layout,
echo topic) is :mod:`streaming.state_format`'s.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import struct
import tempfile
import zlib
from pathlib import Path

from core.config import ConfigError
from runtime.files import read_bounded

#: Spark's write-ahead logs in a checkpoint: each file ``v1``, then one JSON line per entry.
LOGS = ("offsets", "commits")
#: What Spark's checkpoint holds besides its logs: with none of these, it has not run there.
SPARK_ENTRIES = ("metadata", "offsets", "commits", "state", "sources")
#: The log files read and checked at most (Spark keeps 100 batches of each by default).
MAX_LOG_FILES = 10_000
#: Larger than any log file Spark writes (a few KiB): a bigger one is not Spark's.
MAX_LOG_BYTES = 16 * 1024 * 1024
#: State files are checked newest first until this many bytes are read (CRC-32 reads about
#: 1 GB/s): a damaged state file fails Spark's first batch with dozens of Java frames.
MAX_STATE_CHECK_BYTES = 512 * 1024 * 1024
MAX_STATE_FILE_BYTES = MAX_STATE_CHECK_BYTES
#: Hadoop's checksum file: magic, then bytes per checksum, then a big-endian CRC-32 per chunk.
CRC_MAGIC = b"crc\0"
REMEDY = "restore it, or start on a new checkpoint directory (its windows are lost)"


def check_writable_dir(path: str, field: str) -> None:
    """Make ``path`` if missing and write a file in it: a directory the job could not write is
    one line naming ``field``, now, not a traceback at the first batch."""
    directory = Path(path)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigError(f"{field}: {path} exists and is not a directory") from None
    except OSError as exc:
        raise ConfigError(f"{field}: cannot create {path}: {exc.strerror}") from None
    if not directory.is_dir():
        raise ConfigError(f"{field}: {path} exists and is not a directory")
    try:
        fd, probe = tempfile.mkstemp(prefix=".nines-write-test-", dir=directory)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigError(f"{field}: cannot write in {path}: {exc.strerror}") from None


def check_log_file(path: str, field: str) -> None:
    """A log file the JVM can append to: its directory writable, the path no directory, FIFO
    or device (log4j would block on a FIFO, or fail without a word)."""
    file = Path(path)
    check_writable_dir(str(file.parent), field)
    try:
        mode = os.stat(file).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ConfigError(f"{field}: cannot use {path}: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise ConfigError(f"{field}: {path} exists and is not a regular file")


def is_temporary(name: str) -> bool:
    """Whether ``name`` is a hidden file: a write not yet renamed into place (Spark's
    ``CheckpointFileManager`` writes ``.NAME.<uuid>[TID].tmp``, then renames it), or its
    ``.crc``. Spark reads only the names it gave its files (``N``, ``N.delta``, ``N.changelog``,
    ``N.zip``...) and never a hidden one, so the temporary file that a failed commit left (a
    full disk) is no damage: the restart redoes that batch."""
    return name.startswith(".")


def spark_has_run(checkpoint: str) -> bool:
    """Whether Spark has written to ``checkpoint`` (its metadata, a log or state)."""
    return any((Path(checkpoint) / name).exists() for name in SPARK_ENTRIES)


def _damaged(checkpoint: str, what: str) -> ConfigError:
    return ConfigError(f"stream.checkpoint: {checkpoint} is damaged: {what}; {REMEDY}")


def _read(checkpoint: str, path: Path, max_bytes: int = MAX_LOG_BYTES) -> bytes:
    """A checkpoint file's bytes (a regular file, within ``max_bytes``), checked against its
    Hadoop checksum file when it has one."""
    name = path.relative_to(checkpoint).as_posix()
    try:
        data = read_bounded(path, max_bytes)
    except OSError as exc:  # RefusedFile too: not a regular file, or larger than Spark writes
        raise _damaged(checkpoint, f"cannot read {name}: {exc.strerror}") from None
    crc = path.with_name(f".{path.name}.crc")
    if crc.is_file():
        try:
            sums = read_bounded(crc, MAX_LOG_BYTES)
        except OSError as exc:
            raise _damaged(checkpoint, f"cannot read {name}'s checksum: {exc.strerror}") from None
        if not checksum_matches(data, sums):
            raise _damaged(checkpoint, f"{name} does not match its checksum")
    return data


def checksum_matches(data: bytes, sums: bytes) -> bool:
    """Whether ``data`` matches a Hadoop ``.crc`` file (ChecksumFileSystem: CRC-32 per chunk)."""
    if len(sums) < 8 or sums[:4] != CRC_MAGIC:
        return False
    (chunk,) = struct.unpack(">i", sums[4:8])
    if chunk <= 0:
        return False
    chunks = (len(data) + chunk - 1) // chunk
    if len(sums) != 8 + 4 * chunks:
        return False
    for i in range(chunks):
        (want,) = struct.unpack(">I", sums[8 + 4 * i : 12 + 4 * i])
        if zlib.crc32(data[i * chunk : (i + 1) * chunk]) != want:
            return False
    return True


def _json_line(line: str) -> object:
    """One JSON value, or ValueError."""
    return json.loads(line)


def check_logs(checkpoint: str) -> list[object]:
    """Spark's metadata and logs of ``checkpoint`` read as Spark would read them; a damaged one
    is a ConfigError. Returns the latest batch's source offsets (empty before any batch)."""
    root = Path(checkpoint)
    metadata = root / "metadata"
    if metadata.exists():
        try:
            meta = json.loads(_read(checkpoint, metadata).decode())
        except (UnicodeDecodeError, ValueError):
            raise _damaged(checkpoint, "metadata is not Spark's query metadata (JSON)") from None
        if not isinstance(meta, dict) or not isinstance(meta.get("id"), str):
            raise _damaged(checkpoint, "metadata holds no query id")
    latest: list[object] = []
    for log in LOGS:
        directory = root / log
        if not directory.exists():
            continue
        if not directory.is_dir():
            raise _damaged(checkpoint, f"{log} is not a directory")
        batches = sorted((p for p in directory.iterdir() if p.name.isdigit()), key=_batch)
        if len(batches) > MAX_LOG_FILES:
            raise _damaged(checkpoint, f"{log} holds {len(batches):,} batches (Spark keeps 100)")
        for path in batches:
            entries = _entries(checkpoint, path)
            if log == "offsets" and path == batches[-1]:
                latest = entries[1:]
    return latest


def _batch(path: Path) -> int:
    return int(path.name)


def _entries(checkpoint: str, path: Path) -> list[object]:
    """The JSON entries of one log file after its ``v1`` line (``-``: a source with none)."""
    name = path.relative_to(checkpoint).as_posix()
    try:
        lines = _read(checkpoint, path).decode().split("\n")
    except UnicodeDecodeError:
        raise _damaged(checkpoint, f"{name} is not text") from None
    if not lines or lines[0] != "v1":
        raise _damaged(checkpoint, f"{name} is not a version-1 Spark log file")
    entries: list[object] = []
    for line in lines[1:]:
        if line in ("", "-"):
            entries.append(None)
            continue
        try:
            entries.append(_json_line(line))
        except ValueError:
            raise _damaged(checkpoint, f"{name} holds a line that is not JSON") from None
    if not entries or not isinstance(entries[0], dict):
        raise _damaged(checkpoint, f"{name} has no batch metadata")
    return entries


def check_state_files(checkpoint: str, budget_bytes: int = MAX_STATE_CHECK_BYTES) -> int:
    """Every state file (``state/...``) with a Hadoop checksum matches it, newest first, until
    ``budget_bytes`` are read; the bytes read. A damaged one is a ConfigError naming it."""
    state = Path(checkpoint) / "state"
    if not state.is_dir():
        return 0
    files = []
    for crc in state.rglob(".*.crc"):
        data = crc.with_name(crc.name[1:].removesuffix(".crc"))
        if is_temporary(data.name):
            continue
        with contextlib.suppress(OSError):
            files.append((data.stat().st_mtime, data))
    read = 0
    for _, path in sorted(files, reverse=True):
        size = path.stat().st_size
        if read + size > budget_bytes:
            break
        _read(checkpoint, path, MAX_STATE_FILE_BYTES)
        read += size
    return read


def is_our_offset(offset: object) -> bool:
    """Whether a source offset is the nines-kafka source's (``streaming.resets.is_offset``)."""
    from streaming.resets import is_offset

    return is_offset(offset)


def check_checkpoint(checkpoint: str) -> None:
    """The checkpoint directory writable and Spark's logs in it intact, and their source offsets
    this job's source's (another job's checkpoint is refused; its state would be misread)."""
    check_writable_dir(checkpoint, "stream.checkpoint")
    sources = check_logs(checkpoint)
    check_state_files(checkpoint)
    offsets = [s for s in sources if s is not None]
    if len(offsets) > 1 or not all(is_our_offset(o) for o in offsets):
        raise ConfigError(
            f"stream.checkpoint: {checkpoint} was written by another Spark job (its offsets are "
            "not those of nines' Kafka source): start on a new checkpoint directory"
        )


__all__ = [
    "check_checkpoint",
    "check_logs",
    "check_state_files",
    "check_writable_dir",
    "checksum_matches",
    "is_our_offset",
    "is_temporary",
    "spark_has_run",
]
