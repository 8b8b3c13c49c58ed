"""SASL_SSL (SCRAM-SHA-512) end to end on Apache Kafka: the probe and the stream job
authenticate through their ``kafka:`` settings, as an operator writes them in the config file;
a wrong password or an untrusted certificate is one line, exit 2, and no secret printed.

``nines broker --engine kafka --sasl`` makes the listener's CA, user and password at start and
names a client config (``ctl sasl``) whose password is a ``file:`` reference.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_cluster import producer
from probe_runs import records_of, wait_archived

from core.echo import Echo, encode_record
from testbroker import EmbeddedBroker

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def sasl_kafka(require_kafka_jars: None) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(engine="kafka", brokers=1, sasl=True) as cluster:
        yield cluster


def nines(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "monitor", *args], capture_output=True,
                          text=True, timeout=timeout_s, cwd=ROOT)  # fmt: skip


def test_probe_and_stream_authenticate_with_scram_over_tls(
    sasl_kafka: EmbeddedBroker, tmp_path: Path
) -> None:
    bootstrap, config = sasl_kafka.sasl_client()
    password = (config.parent / "password").read_text().strip()
    probe = nines("probe", "--bootstrap", bootstrap, "--config", str(config), "--probe-id",
                  "sasl", "--cluster", "sasl", "--rate", "50", "--duration", "3s",
                  "--metrics-port", "0")  # fmt: skip
    assert probe.returncode == 0, probe.stderr[-2000:]
    assert password not in probe.stdout + probe.stderr
    echoes, _ = records_of(sasl_kafka.bootstrap, "sasl")  # read back over the plain listener
    assert len(echoes) >= 140 and not [e for e in echoes if e.lost]

    end_us = max(e.intended_us for e in echoes) + 120_000_000  # closes every window
    prod = producer(sasl_kafka.bootstrap)
    prod.produce("nines.echoes", value=encode_record(
        Echo("p", "pusher", "pusher", 0, 1, 0, 1, end_us, end_us, None, end_us + 1)))  # fmt: skip
    prod.flush()
    archive, log = tmp_path / "archive", tmp_path / "stream.log"
    with log.open("wb") as err:
        stream = subprocess.Popen(
            [sys.executable, "-m", "monitor", "stream", "--bootstrap", bootstrap, "--config",
             str(config), "--windows", "10s", "--watermark", "1s", "--trigger", "500ms",
             "--starting-offsets", "earliest", "--archive", str(archive), "--metrics-port", "0",
             "--master", "local[2]"],
            stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT,
        )  # fmt: skip
    try:
        wait_archived(stream, log, archive, "sasl", len(echoes), 180)
        stream.send_signal(signal.SIGTERM)
        assert stream.wait(60) == 0
    finally:
        if stream.poll() is None:
            stream.kill()
    assert password not in log.read_text()


def test_a_wrong_password_or_an_untrusted_ca_is_one_line_and_exit_2(
    sasl_kafka: EmbeddedBroker, tmp_path: Path
) -> None:
    from tls_material import make_tls

    bootstrap, config = sasl_kafka.sasl_client()
    password = (config.parent / "password").read_text().strip()
    wrong = tmp_path / "wrong-password"
    wrong.write_text("not-the-password-5c1e7\n")
    other_ca = make_tls(tmp_path / "other").ca  # a CA that signed nothing of the broker's
    text = config.read_text()
    cases = {
        "SASL authentication error": text.replace(str(config.parent / "password"), str(wrong)),
        "certificate verify failed": text.replace(str(config.parent / "ca.crt"), str(other_ca)),
    }
    for expect, body in cases.items():
        bad = tmp_path / "bad.yaml"
        bad.write_text(body)
        for argv in (["probe", "--rate", "10", "--duration", "2s", "--metrics-port", "0"],
                     ["stream", "--metrics-port", "0"]):  # fmt: skip
            run = nines(argv[0], "--bootstrap", bootstrap, "--config", str(bad), *argv[1:])
            lines = run.stderr.strip().splitlines()
            assert run.returncode == 2 and len(lines) == 1, (argv[0], run.stderr[-2000:])
            assert lines[0].startswith(f"nines {argv[0]}: error: bootstrap: {bootstrap}: ")
            assert expect in lines[0], lines[0]
            for secret in (password, "not-the-password-5c1e7"):
                assert secret not in run.stdout + run.stderr


def test_a_ca_bundle_file_is_read_once_and_handed_over_as_text(
    sasl_kafka: EmbeddedBroker, tmp_path: Path
) -> None:
    """``ssl.ca.location`` is read once through the bounded reader and given to librdkafka as
    ``ssl.ca.pem`` (a file swapped after the check is never opened): a bundle of two CAs, the
    broker's second, still verifies the broker, through the real probe."""
    from tls_material import make_tls

    bootstrap, config = sasl_kafka.sasl_client()
    ca = config.parent / "ca.crt"
    bundle = tmp_path / "bundle.crt"
    bundle.write_text(make_tls(tmp_path / "other").ca.read_text() + ca.read_text())
    bad = tmp_path / "bundle.yaml"
    bad.write_text(config.read_text().replace(str(ca), str(bundle)))
    probe = nines("probe", "--bootstrap", bootstrap, "--config", str(bad), "--probe-id",
                  "bundle", "--cluster", "bundle", "--rate", "20", "--duration", "2s",
                  "--metrics-port", "0")  # fmt: skip
    assert probe.returncode == 0, probe.stderr[-2000:]
    echoes, _ = records_of(sasl_kafka.bootstrap, "bundle")
    assert len(echoes) >= 30 and not [e for e in echoes if e.lost]


def test_the_sources_reader_authenticates_with_the_typed_password(
    sasl_kafka: EmbeddedBroker, tmp_path: Path
) -> None:
    """What Spark's workers run, without Spark: the source's reader, built from the job's
    options and shipped as Spark ships it (cloudpickle), holds the password as ``SecretStr``
    again and hands it to its consumer, which reads the echo topic's offsets over SASL_SSL."""
    import pickle

    from pydantic import SecretStr
    from pyspark import cloudpickle

    from core.config import build, section
    from monitor.pipeline import PipelineConfig
    from runtime.config_io import load_yaml
    from streaming.options import encode_options
    from streaming.source import KafkaEchoReader

    bootstrap, config = sasl_kafka.sasl_client()
    prod = producer(sasl_kafka.bootstrap)  # the echo topic, over the plain listener
    prod.produce("nines.echoes", value=b"{}")
    prod.flush()
    values = {**section(load_yaml(config), "stream"), "bootstrap": bootstrap}
    stream = build(PipelineConfig, values, prefix="stream")
    assert isinstance(stream.kafka["sasl.password"], SecretStr)
    reader = KafkaEchoReader(encode_options(stream, str(tmp_path / "checkpoint"), 1))
    reader = pickle.loads(cloudpickle.dumps(reader))
    assert isinstance(reader.kafka["sasl.password"], SecretStr)
    assert "file:" not in repr(reader.kafka)
    assert reader._watermarks()  # the partitions' offsets: SCRAM passed with the real password
