"""A running probe's /metrics (``nines probe``, the mock broker) answers scrapes within 1 s
while 1,100 connections from the scraper's own address (127.0.0.1) sit idle, trickle a request
head (or a TLS ClientHello) a byte a second, or stop mid-handshake, each reopened when cut: more
than twice the server's connection cap. A scrape on a fresh connection is incomplete like the
flood's until its head is in, so most (not all) of them are answered and the rest are cut, never
left hanging (``probe_flood.run_flooded`` says why); every one on a kept connection is answered.
The probe started under a soft open-file limit of 256, and raised it to the hard limit itself.

Over TLS also under a CPU attack: 1,100 connections that each send a ClientHello, take the
probe's signed answer, reset and reconnect at once; a scraper that keeps its connection, as
Prometheus does, gets every scrape within 1 s on the one connection it opened before the flood.

The probe's schedule under the flood is judged two ways. Here, that no send waited as long as a
scrape's deadline: the flooded send lag's p99.9 stays under 1 s, a bound only a server that
holds the interpreter (or the machine) that long can break. The ratio of that p99.9 to the
same run's healthy figure is a benchmark (``tests/bench/test_probe_flood_bench.py``, part
``flood`` of ``make bench``): a p99.9 of ~2,700 sends is their third largest, and on a shared
2-core machine it failed a 2x bound in 3 of 6 runs of this file (issue 41), so it is reported
with its spread, not asserted.
"""

from __future__ import annotations

from pathlib import Path

from kafka_cluster import Cluster
from probe_flood import CHURN, PLAIN, TLS, run_flooded


def test_a_probes_plain_metrics_outlive_a_flood_and_its_schedule_holds(
    broker: Cluster, tmp_path: Path
) -> None:
    run_flooded(broker, tmp_path, PLAIN, tls=False)


def test_a_probes_tls_metrics_outlive_a_flood_of_idle_and_half_handshakes(
    broker: Cluster, tmp_path: Path
) -> None:
    run_flooded(broker, tmp_path, TLS, tls=True)


def test_a_probes_tls_metrics_outlive_a_handshake_flood_on_a_kept_connection(
    broker: Cluster, tmp_path: Path
) -> None:
    run_flooded(broker, tmp_path, CHURN, tls=True, keep_alive=True)
