"""What an operator gets wrong, ``nines stream`` refuses in one line, exit 2, before Spark starts.

A ``spark://`` master with nothing listening took 69 s and 207 lines; a damaged checkpoint
printed 82 Java frames, an unwritable directory a Python traceback, and a checkpoint of other
windows ran on without a word. Each is now checked before the JVM starts, in about 2 s (a Python
start and the imports); the tests allow :data:`REFUSAL_BOUND_S`. The checkpoints are real: one
written by a real ``nines stream`` run (Spark, local[1]) on the session's broker, then damaged,
a file at a time, as a disk or an operator would.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_cluster import producer, unique_topic

from core.config import ConfigError
from core.echo import Echo, encode_record
from monitor.cli import main
from streaming.state_format import MARKER

#: Seconds a refusal may take: a Python start and the imports, on a loaded 2-core machine.
REFUSAL_BOUND_S = 20.0
T0 = (int(time.time()) // 60 * 60 - 3600) * 1_000_000


def stream_argv(bootstrap: str, topic: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "monitor", "stream", "--bootstrap", bootstrap,
            "--echo-topic", topic, "--windows", "10s,1m", "--watermark", "1s",
            "--trigger", "500ms", "--starting-offsets", "earliest", "--metrics-port", "0",
            "--master", "local[1]", *args]  # fmt: skip


def refused(argv: list[str]) -> tuple[str, float]:
    """Run the CLI; assert exit 2 and one line within the bound; the line."""
    started = time.monotonic()
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    took_s = time.monotonic() - started
    assert out.returncode == 2, out.stderr[-3000:]
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr[-3000:]
    assert lines[0].startswith("nines stream: error: "), lines
    assert took_s < REFUSAL_BOUND_S, took_s
    return lines[0].removeprefix("nines stream: error: "), took_s


def refused_in_process(argv: list[str]) -> str:
    """The same entry point in this process (for many generated values): exit 2, one line."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code  # type: ignore[assignment]
    lines = err.getvalue().strip().splitlines()
    assert code == 2 and len(lines) == 1, (code, err.getvalue()[-2000:])
    return lines[0]


@pytest.fixture(scope="module")
def written(broker: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, Path]:
    """(bootstrap, echo topic, checkpoint) of a real run: a few batches, then SIGTERM."""
    topic = unique_topic(broker, 2)
    prod = producer(broker.bootstrap)
    for seq in range(400):
        at = T0 + seq * 100_000
        echo = Echo(
            "p", "c", "nines.probe", seq % 2, 1, seq, 100, at, at + 500, at + 900, at + 2000
        )
        prod.produce(topic, encode_record(echo), partition=seq % 2)
    prod.flush(30)
    home = tmp_path_factory.mktemp("written")
    ckpt = home / "ckpt"
    log = home / "stream.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            stream_argv(broker.bootstrap, topic, "--checkpoint", str(ckpt)),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + 300
        while not (ckpt / "commits" / "0").exists():
            assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
            time.sleep(0.5)
        time.sleep(3)  # a batch or two more: the watermark moves, state is evicted
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
    assert proc.returncode == 0, log.read_text(errors="replace")[-3000:]
    return broker.bootstrap, topic, ckpt


@pytest.fixture
def copy(written: tuple[str, str, Path], tmp_path: Path) -> Path:
    """A copy of the written checkpoint this test may damage."""
    target = tmp_path / "ckpt"
    shutil.copytree(written[2], target)
    return target


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed on return: nothing listens there


def test_a_spark_master_with_nothing_listening(broker: Any, tmp_path: Path) -> None:
    master = f"spark://127.0.0.1:{closed_port()}"
    line, _ = refused(stream_argv(broker.bootstrap, "nines.echoes", "--master", master))
    assert line.startswith(f"stream.master: nothing answers at {master} (Connection refused)")


MALFORMED = ["spark://", "spark://host", "spark://:7077", "spark://host:0", "spark://host:65536",
             "spark://host:7077,", "spark://a b:7077", "k8s://", "k8s://https://", "mesos://m:5050",
             "local[0]", "local[x]", "yarn-cluster", "spark:/host:7077"]  # fmt: skip


@pytest.mark.parametrize("master", ["spark://host", "spark://", "mesos://m:5050"])
def test_a_malformed_master_url(master: str) -> None:
    line, _ = refused(stream_argv("127.0.0.1:1", "nines.echoes", "--master", master))
    assert line.startswith("stream.master: "), line


@settings(max_examples=80, deadline=None)
@given(
    st.one_of(
        st.sampled_from(MALFORMED),
        st.builds(
            lambda h, p: f"spark://{h}:{p}",
            st.sampled_from(["", "-h", "h_", "[zz]"]),
            st.integers(1, 65535),
        ),
        st.builds(lambda p: f"spark://h:{p}", st.integers(65536, 10**9)),
    )
)
def test_malformed_masters_generated(master: str) -> None:
    line = refused_in_process(["stream", "--bootstrap", "127.0.0.1:1", "--master", master])
    assert line.startswith("nines stream: error: stream.master: "), line


def test_an_unwritable_checkpoint_archive_or_spark_log(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    cases = {
        ("--checkpoint", str(a_file / "ckpt")): "stream.checkpoint: cannot create",
        ("--checkpoint", str(a_file)): "stream.checkpoint: ",
        ("--archive", str(a_file / "archive")): "stream.archive: cannot create",
        ("--archive", "/sys/nines-archive"): "stream.archive: cannot create /sys/nines-archive",
        ("--checkpoint", "/proc/nines-ckpt"): "stream.checkpoint: cannot create",
        ("--spark-log", str(a_file / "spark.log")): f"stream.spark_log: {a_file} exists and is not",
        ("--spark-log", str(tmp_path)): "stream.spark_log: ",
        ("--spark-log", "/dev/null"): "stream.spark_log: /dev/null exists and is not a regular",
        ("--spark-log", "/sys/spark.log"): "stream.spark_log: cannot write in /sys",
        ("--spark-log", f"{tmp_path}/fifo"): "stream.spark_log: ",
    }
    os.mkfifo(tmp_path / "fifo")  # log4j would block opening it
    for flags, want in cases.items():
        line, _ = refused(stream_argv("127.0.0.1:1", "nines.echoes", *flags))
        assert line.startswith(want), (flags, line)


def test_the_written_checkpoint_passes_every_check(written: tuple[str, str, Path]) -> None:
    """No false alarm: the real run's checkpoint, as Spark left it, is accepted."""
    from streaming.checkpoint import check_checkpoint, check_logs, check_state_files

    _, topic, ckpt = written
    check_checkpoint(str(ckpt))
    assert check_state_files(str(ckpt)) > 0  # its state files were read and matched
    assert check_logs(str(ckpt))  # the last batch's source offsets
    marker = json.loads((ckpt / MARKER).read_text())
    assert marker["job"]["echo_topic"] == topic and marker["job"]["windows"] == ["10s", "1m"]


def checked_files(ckpt: Path) -> list[Path]:
    """Every file of the checkpoint with a Hadoop checksum: metadata, logs, state."""
    return sorted(p.with_name(p.name[1:].removesuffix(".crc")) for p in ckpt.rglob(".*.crc"))


def test_any_damaged_file_is_one_line_naming_the_checkpoint(
    written: tuple[str, str, Path], tmp_path: Path
) -> None:
    """Every checksummed file of the real checkpoint, one byte flipped, then cut short."""
    bootstrap, topic, ckpt = written
    files = checked_files(ckpt)
    assert any(f.parent.name == "offsets" for f in files) and any("state" in f.parts for f in files)
    for i, original in enumerate(files):
        for damage in ("flip", "truncate"):
            target = tmp_path / f"{i}-{damage}"
            shutil.copytree(ckpt, target)
            path = target / original.relative_to(ckpt)
            data = bytearray(path.read_bytes())
            if damage == "flip":
                data[(i * 7919) % len(data)] ^= 0x20
            else:
                del data[len(data) // 2 :]
            path.write_bytes(bytes(data))
            argv = stream_argv(bootstrap, topic, "--checkpoint", str(target))[3:]
            line = refused_in_process(argv)
            assert f"stream.checkpoint: {target} is damaged" in line, (path, line)
            assert "new checkpoint" in line
            shutil.rmtree(target)


def test_temporary_files_of_failed_commits_are_no_damage(
    written: tuple[str, str, Path], copy: Path
) -> None:
    """A full disk fails a commit part-way: Spark's temporary file (``.NAME.<uuid>TID.tmp``) and
    its checksum stay, cut short or empty. Spark never reads them; the restart is no refusal."""
    from streaming.checkpoint import check_checkpoint

    for i, path in enumerate(checked_files(copy)):
        data = path.read_bytes()
        for j, (content, sums) in enumerate(
            [(data[: len(data) // 2], True), (b"", True), (data, False), (data[:1], None)]
        ):
            tmp = path.with_name(f".{path.name}.{i:08x}-{j}-nines.TID{218 + j}.tmp")
            tmp.write_bytes(content)
            crc = tmp.with_name(f".{tmp.name}.crc")
            if sums is not None:  # the data's checksum (a cut write), or a checksum cut short
                src = path.with_name(f".{path.name}.crc").read_bytes()
                crc.write_bytes(src if sums else src[:6])
    check_checkpoint(str(copy))
    # and the flipped byte of a real file is still found beside them
    state = next(
        p for p in checked_files(copy) if "state" in p.parts and not p.name.startswith(".")
    )
    state.write_bytes(bytes([state.read_bytes()[0] ^ 1]) + state.read_bytes()[1:])
    with pytest.raises(ConfigError, match="does not match its checksum"):
        check_checkpoint(str(copy))


def test_a_damaged_checkpoint_through_the_cli(written: tuple[str, str, Path], copy: Path) -> None:
    """The issue's case: 82 Java frames before; now one line, before Spark."""
    bootstrap, topic, _ = written
    last = max((copy / "offsets").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    last.write_bytes(b"v1\n{garbage" + last.read_bytes()[11:])
    line, _ = refused(stream_argv(bootstrap, topic, "--checkpoint", str(copy)))
    assert line.startswith(f"stream.checkpoint: {copy} is damaged: offsets/{last.name}"), line


def test_damage_without_checksums_is_read_as_spark_reads_it(
    written: tuple[str, str, Path], tmp_path: Path
) -> None:
    """A log rewritten whole (its checksum file gone too) must still be Spark's shape."""
    bootstrap, topic, ckpt = written
    damages: dict[str, bytes] = {
        "metadata": b"not json",
        "offsets/0": b"v2\n{}\n",
        "commits/0": b"v1\n",
        "offsets/1": b'v1\n{"batchWatermarkMs":0}\n{"0": 1\n',
        MARKER: b"{",
    }
    for name, content in damages.items():
        target = tmp_path / name.replace("/", "-")
        shutil.copytree(ckpt, target)
        path = target / name
        path.write_bytes(content)
        path.with_name(f".{path.name}.crc").unlink(missing_ok=True)
        line = refused_in_process(stream_argv(bootstrap, topic, "--checkpoint", str(target))[3:])
        assert f"stream.checkpoint: {target} is damaged" in line, (name, line)


def test_a_checkpoint_written_by_another_job(written: tuple[str, str, Path], copy: Path) -> None:
    """Another Spark job's offsets (Spark's Kafka source), then another nines job's topic."""
    bootstrap, topic, _ = written
    other = copy.parent / "other"
    other.mkdir()
    (other / "metadata").write_text('{"id":"a6f5b1a4-0000-4000-8000-000000000000"}')
    (other / "offsets").mkdir()
    (other / "offsets" / "0").write_text(
        'v1\n{"batchWatermarkMs":0,"batchTimestampMs":0,"conf":{}}\n{"orders":{"0":42,"1":7}}\n'
    )
    line, _ = refused(stream_argv(bootstrap, topic, "--checkpoint", str(other)))
    assert line.startswith(f"stream.checkpoint: {other} was written by another Spark job"), line

    another = topic + "-other"
    line, _ = refused(stream_argv(bootstrap, another, "--checkpoint", str(copy)))
    assert line.startswith(f"stream.echo_topic: {copy} holds the state of a job with echo_topic")


@pytest.mark.parametrize(
    ("flags", "field"),
    [
        (("--windows", "10s,1m,1h"), "windows"),
        (("--windows", "5s,1m"), "windows"),
        (("--digits", "2"), "digits"),
    ],
)
def test_a_checkpoint_of_other_windows_or_digits_is_refused(
    written: tuple[str, str, Path], copy: Path, flags: tuple[str, str], field: str
) -> None:
    """Recorded at the first start, compared at every start after (the flags come last and win)."""
    bootstrap, topic, _ = written
    line, _ = refused(stream_argv(bootstrap, topic, "--checkpoint", str(copy), *flags))
    assert line.startswith(f"stream.{field}: {copy} holds the state of a job with {field}"), line
    assert "new checkpoint directory" in line


@settings(max_examples=30, deadline=None)
@given(
    st.sampled_from(["windows", "digits", "lowest_us", "highest", "echo_topic"]),
    st.data(),
)
def test_every_recorded_setting_is_compared(
    written: tuple[str, str, Path], field: str, data: st.DataObject
) -> None:
    """Generated other values of each recorded setting: each refused, naming that setting."""
    import tempfile

    bootstrap, topic, ckpt = written
    other = {
        "windows": st.sampled_from(["10s", "1m", "10s,1h", "20s,1m", "10s,1m,1h"]),
        "digits": st.sampled_from(["1", "2", "4"]),
        "lowest_us": st.sampled_from(["2", "10", "1000"]),
        "highest": st.sampled_from(["1h1s", "2h", "10m"]),
        "echo_topic": st.sampled_from([topic + "2", "nines.echoes-b", "x"]),
    }[field]
    value = data.draw(other)
    with tempfile.TemporaryDirectory() as home:
        target = Path(home) / "ckpt"
        shutil.copytree(ckpt, target)
        argv = stream_argv(bootstrap, topic, "--checkpoint", str(target))[3:]
        if field in ("lowest_us", "highest"):
            config = Path(home) / "nines.yaml"
            config.write_text(f"stream: {{{field}: {value}}}\n")
            argv += ["--config", str(config)]
        else:
            argv += [f"--{field.replace('_', '-')}", value]
        line = refused_in_process(argv)
        assert line.startswith(f"nines stream: error: stream.{field}: {target} holds"), line
