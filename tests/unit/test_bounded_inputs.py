"""Every input is bounded: a FIFO, a device, a directory, an oversized file or a YAML bomb is
refused in one line, exit 2, in bounded time, through every command an operator runs.

Unit level (hypothesis, widely): ``runtime.files.read_bounded`` over file kinds and sizes around
the cap; ``runtime.safe_yaml.load`` over billion-laughs documents of any width and depth, nesting of
any style and depth, and duplicate keys at any depth.

CLI level: every file flag of every command (``--config`` of probe, stream and broker, ``--sla``
of alerts and slo, ``--web-config-file``, ``file:`` secrets, ``--token-file``, ``ctl
--ready-file``, ``--archive``) × every bad kind, in-process through ``monitor.cli.main`` (a
watchdog alarm bounds each run), and the FIFO and ``/dev/zero`` as their own processes.
"""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from bad_input_cases import LISTENER, Case, Fixture, problems, run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import safe_yaml
from runtime.files import MAX_CONFIG_BYTES, RefusedFile, read_bounded

ROOT = Path(__file__).resolve().parents[2]
SLA = ROOT / "examples" / "sla.yaml"
#: Seconds any refusal may take (each takes milliseconds; a blocked read takes for ever).
BOUND_S = 10.0
UNIT = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(autouse=True)
def _watchdog() -> Iterator[None]:
    """A blocked read fails the test instead of hanging the suite."""

    def expired(*_: Any) -> None:
        raise TimeoutError(f"blocked for more than {BOUND_S * 3:g} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(int(BOUND_S * 3))
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# --- the bounded reader -------------------------------------------------------------------------


def make(kind: str, where: Path, size: int = 0) -> Path:
    """A path of ``kind`` under ``where``."""
    path = where / f"input-{kind}"
    if kind == "regular":
        path.write_bytes(b"a" * size)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
        s.close()
    elif kind in ("zero", "null"):
        path.symlink_to(f"/dev/{kind}")
    elif kind == "link-to-fifo":
        os.mkfifo(where / "target-fifo")
        path.symlink_to(where / "target-fifo")
    return path


KINDS = ("fifo", "directory", "socket", "zero", "null", "link-to-fifo")


@UNIT
@given(
    kind=st.sampled_from(("regular", *KINDS)), cap=st.integers(0, 4096), offset=st.integers(-3, 3)
)
def test_read_bounded_reads_regular_files_within_the_cap_only(
    tmp_path_factory: pytest.TempPathFactory, kind: str, cap: int, offset: int
) -> None:
    where = tmp_path_factory.mktemp("kind")
    size = max(0, cap + offset)
    path = make(kind, where, size)
    t0 = time.monotonic()
    if kind == "regular" and size <= cap:
        assert read_bounded(path, cap) == b"a" * size
    else:
        with pytest.raises(OSError) as caught:
            read_bounded(path, cap)
        reason = caught.value.strerror
        assert reason and "\n" not in reason
        if kind == "regular":
            assert isinstance(caught.value, RefusedFile) and "larger than its cap" in reason
        elif kind == "directory":
            assert reason == "Is a directory"
        elif kind != "socket":  # a socket does not even open (ENXIO)
            assert reason.startswith("not a regular file (")
    assert time.monotonic() - t0 < BOUND_S


def test_a_file_that_grows_past_its_cap_while_read_is_refused(tmp_path: Path) -> None:
    """The cap holds on what is read, not only on what ``fstat`` said."""
    path = tmp_path / "growing"
    path.write_bytes(b"a" * 10)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, b"b" * 100)  # after the size check would have passed at 10 bytes
        with pytest.raises(RefusedFile):
            read_bounded(path, 50)
    finally:
        os.close(fd)


# --- the YAML loader ----------------------------------------------------------------------------


def laughs(width: int, levels: int) -> tuple[str, int]:
    """A billion-laughs document under a string field, and its node count with aliases
    expanded (the root mapping, its keys, every list and leaf)."""
    lines = ["probe:", "  a0: &a0 " + "x" * 8]
    expanded = {0: 1}
    for i in range(1, levels + 1):
        lines.append(f"  a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
        expanded[i] = 1 + width * expanded[i - 1]
    lines.append(f"  topic: *a{levels}")
    section = 1 + sum(1 + expanded[i] for i in range(levels + 1)) + 1 + expanded[levels]
    return "\n".join(lines) + "\n", 1 + 1 + section


@UNIT
@given(st.integers(2, 12), st.integers(1, 9))
def test_alias_expansion_is_within_a_budget(width: int, levels: int) -> None:
    text, total = laughs(width, levels)
    t0 = time.monotonic()
    if total <= safe_yaml.MAX_NODES:
        assert safe_yaml.load(text)["probe"]["a0"] == "x" * 8
    else:
        with pytest.raises(safe_yaml.RefusedYaml, match="aliases are expanded within a budget"):
            safe_yaml.load(text)
    assert time.monotonic() - t0 < BOUND_S


def nested(style: str, depth: int) -> str:
    """A value nested ``depth`` levels (the leaf counted) in one of YAML's four ways."""
    if style == "flow-seq":
        return "[" * (depth - 1) + "1" + "]" * (depth - 1)
    if style == "flow-map":
        return "{a: " * (depth - 1) + "1" + "}" * (depth - 1)
    if style == "block-seq":
        return "".join("  " * i + "-\n" for i in range(depth - 2)) + "  " * (depth - 2) + "- 1\n"
    return "".join("  " * i + "a:\n" for i in range(depth - 2)) + "  " * (depth - 2) + "a: 1\n"


@UNIT
@given(
    st.sampled_from(("flow-seq", "flow-map", "block-seq", "block-map")),
    st.one_of(st.integers(2, safe_yaml.MAX_DEPTH), st.integers(safe_yaml.MAX_DEPTH + 1, 5000)),
)
def test_nesting_has_a_depth_limit(style: str, depth: int) -> None:
    text = nested(style, depth)
    t0 = time.monotonic()
    if depth <= safe_yaml.MAX_DEPTH:
        assert safe_yaml.load(text) is not None
    else:
        with pytest.raises(safe_yaml.RefusedYaml) as caught:
            safe_yaml.load(text)
        assert str(caught.value).startswith(f"nested deeper than {safe_yaml.MAX_DEPTH} levels")
    assert time.monotonic() - t0 < BOUND_S


#: Keys no YAML 1.1 rule reads as anything but a string (``null``, ``on``, ``y`` ...).
keys = st.from_regex(r"k[a-z_]{0,6}", fullmatch=True)


@UNIT
@given(st.lists(keys, min_size=1, max_size=6), st.integers(0, 5), st.booleans())
def test_duplicate_keys_are_refused_at_every_level(path: list[str], at: int, flow: bool) -> None:
    """The mapping at depth ``at`` along ``path`` gets its key written twice."""
    at = min(at, len(path) - 1)
    document: Any = "v"
    for key in reversed(path):
        document = {key: document, "other": 1}
    text = yaml.safe_dump(document, default_flow_style=flow, sort_keys=False)
    assert safe_yaml.load(text) == document
    if flow:  # one line: the key again at the start of the mapping at depth ``at``
        opening = [i for i, c in enumerate(text) if c == "{"][at] + 1
        doubled = text[:opening] + f"{path[at]}: again, " + text[opening:]
    else:  # the key again, on a line of its own before the key's line (the one of its indent)
        lines = text.splitlines(keepends=True)
        line = f"{'  ' * at}{path[at]}:"
        where = next(i for i, text_line in enumerate(lines) if text_line.startswith(line))
        doubled = "".join([*lines[:where], f"{line} again\n", *lines[where:]])
    with pytest.raises(safe_yaml.RefusedYaml, match=f"duplicate key {path[at]!r}"):
        safe_yaml.load(doubled)


# --- the CLI, as operators run it ---------------------------------------------------------------

BILLION_LAUGHS = laughs(10, 9)[0]
DEEP = "probe:\n  topic: " + nested("flow-seq", 3000) + "\n"
DUPLICATE_SECTION = "probe:\n  rate: 5\nstream:\n  highest: 60s\nprobe:\n  rate: 6\n"
DUPLICATE_NESTED = "probe:\n  kafka:\n    acks: all\n    acks: '1'\n"
#: What each bad kind must say after ``cannot read PATH: `` (or, for YAML, after ``PATH: ``).
KIND_REASONS = {
    "fifo": "not a regular file (a FIFO)",
    "zero": "not a regular file (a character device)",
    "directory": "Is a directory",
    "oversized": "larger than its cap of 1 MiB",
}
YAML_BOMBS = {
    "billion-laughs": (BILLION_LAUGHS, "more than 100,000 values with its aliases expanded"),
    "3000-levels": (DEEP, "nested deeper than 64 levels"),
    "duplicate-section": (DUPLICATE_SECTION, "duplicate key 'probe'"),
    "duplicate-nested-key": (DUPLICATE_NESTED, "duplicate key 'acks'"),
}


def prepare_input(kind: str, directory: Path) -> Path:
    path = directory / "input"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    elif kind == "oversized":
        path.write_bytes(b"# padding\n" * (MAX_CONFIG_BYTES // 10 + 1))
    else:
        path.write_text(YAML_BOMBS[kind][0])
    return path


def fixture_for(kind: str, extra: dict[str, str] | None = None) -> Fixture:
    def prepare(directory: Path) -> dict[str, str]:
        return {"INPUT": str(prepare_input(kind, directory)), **(extra or {})}

    return Fixture(f"INPUT is {kind}", prepare)


#: (command flags, the field the line names, whether the input is YAML, the message's form)
FILE_FLAGS: list[tuple[tuple[str, ...], str, bool]] = [
    (("probe", "--bootstrap", LISTENER, "--config", "INPUT"), "config", True),
    (("stream", "--bootstrap", LISTENER, "--config", "INPUT"), "config", True),
    (("broker", "--config", "INPUT"), "config", True),
    (("alerts", "render", "--sla", "INPUT"), "config", True),
    (("slo", "--archive", "ARCHIVE", "--sla", "INPUT"), "config", True),
    (
        ("probe", "--bootstrap", LISTENER, "--metrics-port=0", "--web-config-file", "INPUT"),
        "web-config-file",
        True,
    ),
    (
        ("stream", "--bootstrap", LISTENER, "--metrics-port=0", "--web-config-file", "INPUT"),
        "web-config-file",
        True,
    ),
    (("dashboards", "push", "--url", "http://127.0.0.1:9", "--token-file", "INPUT"), "", False),
]


def cli_cases() -> Iterator[tuple[str, Case, str]]:
    for flags, field, is_yaml in FILE_FLAGS:
        command, args = flags[0], flags[1:]
        kinds = [*KIND_REASONS, *(YAML_BOMBS if is_yaml else ())]
        for kind in kinds:
            extra = {"ARCHIVE": "/nonexistent-archive"} if "ARCHIVE" in flags else None
            if kind in KIND_REASONS:
                reason = KIND_REASONS[kind]
                if not is_yaml and kind == "oversized":
                    reason = "larger than its cap of 64 KiB"
                expect = f"cannot read INPUT: {reason}"
            else:
                expect = f"INPUT: {YAML_BOMBS[kind][1]}"
            prefix = f"{field}: " if field else "token-file: "
            case = Case(
                "bounded", command, args, None, prefix + expect, False, fixture_for(kind, extra)
            )
            yield f"{' '.join(flags[:2])}-{field or 'token'}-{kind}", case, prefix + expect


CLI_CASES = list(cli_cases())


@pytest.mark.parametrize(("name", "case", "expect"), CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_every_file_flag_refuses_every_bad_kind_in_one_line(
    name: str, case: Case, expect: str
) -> None:
    t0 = time.monotonic()
    result = run(case)
    elapsed = time.monotonic() - t0
    wrong = [p for p in problems(case, result) if "does not start with" not in p]
    assert wrong == [], (name, result)
    message = result.message(case.command)
    assert message.startswith(expect), (name, message)
    assert elapsed < BOUND_S, f"{name}: {elapsed:.1f} s"


def test_a_file_secret_that_is_a_fifo_or_a_device_is_refused(tmp_path: Path) -> None:
    for kind in ("fifo", "zero", "directory"):
        where = tmp_path / kind
        where.mkdir()
        path = prepare_input(kind, where)
        config = f"probe:\n  kafka:\n    sasl.password: file:{path}\n"
        case = Case("bounded", "probe", ("--bootstrap", LISTENER), config, "")
        result = run(case)
        assert result.code == 2 and len(result.err.splitlines()) == 1, result
        assert f"kafka.sasl.password: cannot read file {path}: {KIND_REASONS[kind]}" in result.err


@pytest.mark.parametrize("command", ["probe", "stream"])
def test_a_client_file_that_is_a_fifo_or_a_device_is_refused(command: str, tmp_path: Path) -> None:
    """librdkafka would block on a FIFO named as its CA file, or read a device for ever."""
    for kind in ("fifo", "zero"):
        where = tmp_path / kind
        where.mkdir()
        path = prepare_input(kind, where)
        config = f"{command}:\n  kafka:\n    ssl.ca.location: {path}\n"
        config += "    security.protocol: SSL\n"
        t0 = time.monotonic()
        result = run(Case("bounded", command, ("--bootstrap", LISTENER), config, ""))
        assert time.monotonic() - t0 < BOUND_S
        assert result.code == 2 and len(result.err.splitlines()) == 1, result
        assert f"ssl.ca.location: cannot read {path}: {KIND_REASONS[kind]}" in result.err, result


def test_a_ready_file_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    path = prepare_input("fifo", tmp_path)
    case = Case("bounded", "broker", ("ctl", "--ready-file", str(path), "pid", "0"), None, "")
    result = run(case)
    assert result.code == 2 and len(result.err.splitlines()) == 1, result
    assert "not a regular file (a FIFO)" in result.err


def test_an_archive_file_that_is_a_fifo_is_refused_not_read(tmp_path: Path) -> None:
    """A FIFO where a batch file belongs is named as a bad file (``--skip-bad`` leaves it out)."""
    from tests.unit.report.bad_archives import build_archive

    archive = tmp_path / "archive"
    bad = build_archive(archive)
    bad.unlink()
    os.mkfifo(bad)
    assert stat.S_ISFIFO(os.stat(bad).st_mode)
    flags = ("--archive", str(archive), "--out", str(tmp_path / "x.png"))
    result = run(Case("bounded", "report", flags, None, ""))
    assert result.code == 2 and len(result.err.splitlines()) == 1, result
    assert f"{bad}: cannot read: not a regular file (a FIFO)" in result.err
    result = run(Case("bounded", "report", (*flags, "--skip-bad"), None, ""))
    assert result.code == 0, result
    assert "not a regular file (a FIFO)" in result.err


@pytest.mark.parametrize("kind", ["fifo", "zero"])
@pytest.mark.parametrize(
    "argv",
    [["probe", "--bootstrap", "127.0.0.1:9", "--config"], ["alerts", "render", "--sla"]],
    ids=["probe-config", "alerts-sla"],
)
def test_real_process_refuses_at_once(kind: str, argv: list[str], tmp_path: Path) -> None:
    """As an operator runs it: its own process; it must answer, not hang or read for ever."""
    path = prepare_input(kind, tmp_path)
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "monitor", *argv, str(path)],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert time.monotonic() - t0 < BOUND_S
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr.splitlines() == [
        f"nines {argv[0]}: error: config: cannot read {path}: {KIND_REASONS[kind]}"
    ]
