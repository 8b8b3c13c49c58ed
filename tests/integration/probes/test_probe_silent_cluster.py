"""A cluster that accepts connections and never answers does not stop ``nines probe``: it starts,
says so in one line, exports how long the cluster has been silent, keeps asking, and probes
every partition once the cluster answers; with ``--manage-topic`` it creates the missing probe
topic then.

The silent cluster is a plain listening socket in front of the session's mock cluster: it holds
each connection without a byte in reply until ``answer()``, which drops what it held (as a
restarting broker does) and forwards every new connection from then on.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import uuid
from pathlib import Path

import pytest
from kafka_cluster import Cluster
from probe_runs import RATE, ProbeProcess, probe_metrics, until

SILENT_LINE = "accepted the connection but sent no metadata in 5 s"


class SilentThenForward:
    """A bootstrap address that accepts and never answers, then forwards to ``target``."""

    def __init__(self, target: str) -> None:
        host, _, port = target.partition(",")[0].rpartition(":")
        self.target = (host, int(port))
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.held: list[socket.socket] = []
        self.forwarding = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:  # closed
                return
            if not self.forwarding:
                self.held.append(conn)  # never read, never answered
                continue
            up = socket.create_connection(self.target)
            for a, b in ((conn, up), (up, conn)):
                threading.Thread(target=pump, args=(a, b), daemon=True).start()

    def answer(self) -> None:
        """From now on, a broker: the held connections are dropped, new ones forwarded."""
        self.forwarding = True
        for conn in self.held:
            conn.close()

    def close(self) -> None:
        self.server.close()
        for conn in self.held:
            conn.close()


def pump(src: socket.socket, dst: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            dst.sendall(data)
    for s in (src, dst):
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)


@pytest.mark.parametrize("manage", [False, True], ids=["topic-exists", "manage-topic"])
def test_a_probe_starts_on_a_cluster_that_never_answers_and_probes_once_it_does(
    request: pytest.FixtureRequest, tmp_path: Path, manage: bool
) -> None:
    # managed on Apache Kafka: it auto-creates no topic (the mock makes one on a producer's ask)
    broker: Cluster = request.getfixturevalue("kafka_broker" if manage else "broker")
    silent = SilentThenForward(broker.bootstrap)
    name = f"silent-{uuid.uuid4().hex[:6]}"
    # managed: a topic the cluster does not have yet, created once it answers
    topic, args = (name, ("--manage-topic", "--topic", name)) if manage else ("nines.probe", ())
    probe = ProbeProcess(f"127.0.0.1:{silent.port}", name, tmp_path, *args)
    age = 'nines_probe_metadata_age_seconds{cluster="default"}'
    exists = f'nines_probe_topic_exists{{cluster="default",topic="{topic}"}}'

    def scrape() -> dict[str, float]:
        return probe_metrics(probe.port, missing_ok=True)

    try:
        until(lambda: SILENT_LINE in probe.stderr(), probe.stderr)
        until(lambda: age in scrape(), probe.stderr)  # it runs, /metrics answers
        first = scrape()
        assert first[exists] == 0 and first[age] >= 5, first
        # it keeps asking, the cluster keeps silent: the age grows, nothing else is said
        until(lambda: scrape()[age] >= first[age] + 3, probe.stderr)
        assert probe.proc.poll() is None, probe.stderr()
        lines = probe.stderr().splitlines()
        assert len([line for line in lines if SILENT_LINE in line]) == 1, lines
        assert "Traceback" not in probe.stderr() and "rdkafka" not in probe.stderr()

        silent.answer()  # every partition is probed from then on
        # managed: created at the first survey answered, seconds after (not a 60 s interval)
        until(lambda: scrape().get(exists) == 1, probe.stderr, timeout_s=30)
        until(
            lambda: all(
                scrape().get(
                    f'nines_probe_received_total{{cluster="default",partition="{p}",'
                    f'topic="{topic}"}}',
                    0,
                )
                >= RATE
                for p in (0, 1, 2)
            ),
            lambda: (scrape(), probe.stderr()),
        )
        assert scrape()[age] < 5
        assert f"probing new partitions [0, 1, 2] of {topic}" in probe.stderr()
        if manage:
            assert f"created {topic}: 3 partitions" in probe.stderr()
        totals = probe.stop()
    finally:
        probe.kill()
        silent.close()
    assert totals["received"] >= 3 * RATE, totals
