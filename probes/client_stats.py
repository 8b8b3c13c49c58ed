"""librdkafka's statistics of the probe's Kafka clients: requests and round trips per broker.

Each client emits a JSON document every :data:`STATS_INTERVAL_MS` through its ``stats_cb``,
served from the thread that polls it. :class:`ClientStats` keeps the latest document of each
client handle; the probe's /metrics (``probes.metrics``) parses and reads it per scrape.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: How often each client emits its statistics. Parsing one document costs 0.2-0.3 ms of CPU
#: (3 to 30 partitions), and is done per scrape, not per document; librdkafka building them
#: costs about 0.1 % of a core at 1 s (docs/metrics.md, "The probe's own cost"). A 1 s window
#: shows a slow broker's RTT within a few seconds.
STATS_INTERVAL_MS = 1000

#: A client whose last reading is older than this many intervals shows no round-trip gauge (a
#: closed client, or one nobody polls, must not show a stale RTT).
STALE_INTERVALS = 3

#: What a broker that librdkafka knows only by its bootstrap address (node id -1) is labelled.
BOOTSTRAP = "bootstrap"


@dataclass(frozen=True)
class BrokerReading:
    """One broker's counters (cumulative) and its RTT over the last statistics window."""

    requests: int
    request_bytes: int
    responses: int
    response_bytes: int
    wakeups: int
    #: RTT over the window in microseconds; None when no response came in it (never 0).
    rtt_avg_us: int | None
    rtt_p99_us: int | None


def parse_stats(document: str) -> tuple[str, dict[str, BrokerReading]]:
    """The handle name and per-broker readings of one librdkafka statistics document.

    Brokers are keyed by node id; ``bootstrap`` for the configured addresses librdkafka has not
    matched to a node yet (summed). Logical brokers (the group coordinator's alias) are left out:
    their requests are not a broker's own.
    """
    stats = json.loads(document)
    out: dict[str, BrokerReading] = {}
    for broker in stats.get("brokers", {}).values():
        if broker.get("source") == "logical":
            continue
        node = int(broker.get("nodeid", -1))
        key = str(node) if node >= 0 else BOOTSTRAP
        rtt = broker.get("rtt") or {}
        seen = int(rtt.get("cnt", 0)) > 0
        reading = BrokerReading(
            int(broker.get("tx", 0)),
            int(broker.get("txbytes", 0)),
            int(broker.get("rx", 0)),
            int(broker.get("rxbytes", 0)),
            int(broker.get("wakeups", 0)),
            int(rtt["avg"]) if seen else None,
            int(rtt["p99"]) if seen else None,
        )
        prior = out.get(key)
        out[key] = reading if prior is None else _add(prior, reading)
    return str(stats.get("name", "")), out


def _add(a: BrokerReading, b: BrokerReading) -> BrokerReading:
    """Two entries under one label: counters add, the RTT is the slower one's."""
    avg = [v for v in (a.rtt_avg_us, b.rtt_avg_us) if v is not None]
    p99 = [v for v in (a.rtt_p99_us, b.rtt_p99_us) if v is not None]
    return BrokerReading(
        a.requests + b.requests,
        a.request_bytes + b.request_bytes,
        a.responses + b.responses,
        a.response_bytes + b.response_bytes,
        a.wakeups + b.wakeups,
        max(avg) if avg else None,
        max(p99) if p99 else None,
    )


@dataclass(frozen=True)
class ClientReading:
    """The latest readings of one client handle, and when they came (monotonic seconds)."""

    client: str
    at_s: float
    brokers: dict[str, BrokerReading]


#: A handle's name, the first field librdkafka writes, found without parsing the document.
_NAME = re.compile(r'"name":\s*"((?:[^"\\]|\\.)*)"')


@dataclass
class _Latest:
    """A handle's latest document, parsed on first read (at a scrape, never on its client's
    poll thread)."""

    client: str
    at_s: float
    document: str
    brokers: dict[str, BrokerReading] | None = None


class ClientStats:
    """The latest statistics of every client handle, by the probe's name for the client.

    A ``stats_cb`` runs on the thread that polls its client (the probe's ack and receive
    threads, which stamp times): it only keeps the document, a few microseconds; the JSON is
    parsed when /metrics is read, once per document. Readings of a closed handle stay, so
    counters summed over a client's handles never go down (the probe opens a consumer per
    partition set it adds). Thread-safe.
    """

    def __init__(
        self,
        interval_ms: int = STATS_INTERVAL_MS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval_ms = interval_ms
        self._clock = clock
        self._lock = threading.Lock()
        self._handles: dict[str, _Latest] = {}
        #: Documents that did not parse (librdkafka should never send one; counted, not raised).
        self.bad_documents = 0

    def settings(self, client: str) -> dict[str, Any]:
        """The librdkafka settings that make ``client`` report here."""
        return {"statistics.interval.ms": self.interval_ms, "stats_cb": self.callback(client)}

    def callback(self, client: str) -> Callable[[str], None]:
        """A ``stats_cb`` that keeps each document under its handle, for ``client``."""

        def on_stats(document: str) -> None:
            found = _NAME.search(document, 0, 256)
            handle = found.group(1) if found else client
            latest = _Latest(client, self._clock(), document)
            with self._lock:
                self._handles[handle] = latest

        return on_stats

    def readings(self) -> list[ClientReading]:
        """Every handle's latest reading (parsing the documents that came since the last call)."""
        with self._lock:
            latest = list(self._handles.values())
        out = []
        for entry in latest:
            brokers = entry.brokers
            if brokers is None:
                try:
                    brokers = parse_stats(entry.document)[1]
                except (ValueError, TypeError, KeyError, AttributeError):
                    with self._lock:
                        self.bad_documents += 1
                    brokers = {}
                entry.brokers = brokers  # a benign race: two scrapes may both parse it
            out.append(ClientReading(entry.client, entry.at_s, brokers))
        return out

    def totals(self) -> dict[tuple[str, str], BrokerReading]:
        """(client, broker) → counters summed over the client's handles; the RTT only from
        handles read within the last :data:`STALE_INTERVALS` intervals (the slowest of them)."""
        fresh_after = self._clock() - STALE_INTERVALS * self.interval_ms / 1000
        out: dict[tuple[str, str], BrokerReading] = {}
        for reading in self.readings():
            for broker, b in reading.brokers.items():
                if reading.at_s < fresh_after:
                    b = BrokerReading(
                        b.requests, b.request_bytes, b.responses, b.response_bytes, b.wakeups,
                        None, None,
                    )  # fmt: skip
                key = (reading.client, broker)
                prior = out.get(key)
                out[key] = b if prior is None else _add(prior, b)
        return out


#: The probe process's clients report here (one probe per process; tests pass their own).
CLIENT_STATS = ClientStats()
