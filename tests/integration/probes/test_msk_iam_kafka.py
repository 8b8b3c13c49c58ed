"""AWS MSK IAM against a real Apache Kafka: the probe and the stream's reader authenticate over
SASL_SSL OAUTHBEARER with tokens signed from the AWS credential chain, refreshed before their
credentials expire.

The broker validates with ``jvm/msk-iam-test-validator`` (test only): it accepts a token that
decodes to a signed ``kafka-cluster:Connect`` URL and records every token it sees; here each
recorded token's signature is recomputed from the secret key its credentials were issued with.
The credentials come from a ``credential_process`` profile and expire 20 s after each issue, so
a token dies with them and librdkafka must refresh it (at 80 % of its lifetime); the listener
makes every client re-authenticate every 3 s, so the broker sees each token in use. What only
AWS can prove (its own check of the signature, IAM policies) is not proven: docs/deploy.md.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from aws_env import aws_env, credential_process, issued_keys, sigv4_signature, url_of
from kafka_cluster import producer
from probe_runs import records_of, start_stream_cli, wait_archived
from real_components import require

from core.echo import Echo, encode_record
from runtime.maven import build_jar, cached_jar
from testbroker.kafka_jars import resolve
from testbroker.kraft import KraftCluster, OAuthListener

ROOT = Path(__file__).resolve().parents[3]
MODULE, JAR = ROOT / "jvm" / "msk-iam-test-validator", "nines-msk-iam-test-validator"
#: Seconds each issue of credentials lives: a token with them (librdkafka refreshes at 80 %).
LIFETIME_S = 20
#: Seconds the probe runs: at least two refreshes.
PROBE_S = 45
RATE = 20


class JarError(RuntimeError):
    """The validator jar cannot be built here."""


def validator_jar() -> str:
    jar = cached_jar(MODULE, JAR)
    if not jar.is_file():
        why = build_jar(MODULE, JAR, 900)
        if why is not None:
            raise JarError(f"cannot build {JAR}: {why}")
    return str(jar)


@pytest.fixture(scope="module")
def msk_kafka(
    require_kafka_jars: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[KraftCluster, Path]]:
    require("the MSK IAM test validator (Maven)", validator_jar, JarError)
    home = tmp_path_factory.mktemp("msk-kafka")
    record = home / "tokens.log"
    listener = OAuthListener(
        "dev.nines.test.RecordingMskIamValidator",
        jaas={"recordFile": str(record), "unsecuredLoginStringClaim_sub": "broker"},
        settings={"listener.name.oauth.connections.max.reauth.ms": "3000"},
        classpath=(validator_jar(),),
    )
    cluster = KraftCluster(resolve(), 1, home, oauth=listener)
    try:
        cluster.start(warm_up=False)
        cluster.create_topic("nines.probe", 1)
        cluster.create_topic("nines.echoes", 1)
        yield cluster, record
    finally:
        cluster.stop()


def test_probe_and_stream_reach_kafka_with_tokens_refreshed_before_expiry(
    msk_kafka: tuple[KraftCluster, Path], tmp_path: Path
) -> None:
    cluster, record = msk_kafka
    aws_config, issued = credential_process(tmp_path / "aws", LIFETIME_S)
    env = aws_env(aws_config)
    config = tmp_path / "nines.yaml"
    config.write_text("".join(
        f"{stage}:\n  kafka_login: aws-msk-iam\n  aws_region: eu-west-1\n"
        f"  kafka: {{ssl.ca.location: '{cluster.oauth_ca}'}}\n" for stage in ("probe", "stream")
    ))  # fmt: skip
    stream, archive, log = start_stream_cli(cluster.oauth_bootstrap, config, tmp_path, env)
    try:
        probe = subprocess.run(
            [sys.executable, "-m", "monitor", "probe", "--bootstrap", cluster.oauth_bootstrap,
             "--config", str(config), "--probe-id", "msk", "--cluster", "msk", "--rate",
             str(RATE), "--duration", f"{PROBE_S}s", "--metrics-port", "0"],
            capture_output=True, text=True, timeout=PROBE_S + 120, cwd=ROOT, env=env,
        )  # fmt: skip
        assert probe.returncode == 0, probe.stderr[-2000:]
        echoes, _ = records_of(cluster.bootstrap, "msk")  # read back over the plain listener
        assert len(echoes) >= RATE * PROBE_S * 0.9, len(echoes)
        assert not [e for e in echoes if e.lost]

        end_us = max(e.intended_us for e in echoes) + 120_000_000  # closes every window
        prod = producer(cluster.bootstrap)
        closer = Echo("p", "pusher", "pusher", 0, 1, 0, 1, end_us, end_us, None, end_us + 1)
        prod.produce("nines.echoes", value=encode_record(closer))
        prod.flush()
        wait_archived(stream, log, archive, "msk", len(echoes), 240)
        stream.send_signal(signal.SIGTERM)
        assert stream.wait(60) == 0, log.read_text()[-3000:]
    finally:
        if stream.poll() is None:
            stream.kill()
            stream.wait(30)

    keys = issued_keys(issued)
    seen = [line.split(" ", 1) for line in record.read_text().splitlines()]
    tokens = {token for _, token in seen}
    for at_ms, token in seen:
        url = url_of(token)
        params = dict(parse_qsl(urlsplit(url).query))
        key = params["X-Amz-Credential"].split("/")[0]
        assert url.startswith(
            "https://kafka.eu-west-1.amazonaws.com/?Action=kafka-cluster%3AConnect"
        )
        assert params["X-Amz-Credential"].endswith("/eu-west-1/kafka-cluster/aws4_request")
        ends, secret = keys[key]
        assert params["X-Amz-Signature"] == sigv4_signature(url, secret)
        # in use only while its credentials live: refreshed before they expired
        assert int(at_ms) / 1000 < ends, (key, int(at_ms) / 1000 - ends)
    # the probe's clients alone: a new token every 16 s for 45 s, used in re-authentications
    signed = sorted({dict(parse_qsl(urlsplit(url_of(t)).query))["X-Amz-Date"] for t in tokens})
    assert len(signed) >= PROBE_S // LIFETIME_S + 1, signed
    for secret_ in (s for _, s in keys.values()):
        assert secret_ not in probe.stdout + probe.stderr + log.read_text()
