"""The CTRL+Z test, side by side: nines' open-loop probe vs a naive closed-loop prober.

Both probe one real ``EmbeddedBroker`` at the same rate while the broker process is SIGSTOPped
once. An open-loop measurement must see a fraction S/T of its messages wait S − t (uniform on
(0, S]) on top of the floor; the closed-loop prober waits with the broker and records one slow
sample. Writes ``bench/results/co.json`` with both raw latency lists and the expectation.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.machine import write_result
from core.hdr import rank_for_quantile

#: Quantiles in the CTRL+Z table (``1.0`` is the max).
CO_QUANTILES = (0.5, 0.9, 0.99, 0.999, 0.9999, 1.0)


@dataclass(frozen=True)
class Scenario:
    """Rate and timing of one CTRL+Z run."""

    rate: float = 200.0
    run_s: float = 20.0
    stall_at_s: float = 7.0
    stall_s: float = 5.0
    drain_s: float = 3.0


QUICK = Scenario(rate=100.0, run_s=12.0, stall_at_s=4.0, stall_s=5.0, drain_s=2.0)


def nearest_rank(latencies_us: Sequence[int], q: float) -> float:
    """Nearest-rank quantile in seconds (q = 1 is the max)."""
    v = np.sort(np.asarray(latencies_us, dtype=np.int64))
    if v.size == 0:
        return math.nan
    if q >= 1.0:
        return float(v[-1]) / 1e6
    return float(v[rank_for_quantile(q, v.size) - 1]) / 1e6


def expected_samples_us(measured_us: Sequence[int], rate: float, stall_s: float) -> Any:
    """The sample set an open-loop measurement must produce, from the arithmetic of the stall.

    The k = rate·S messages intended during the stall wait S, S − 1/rate, …, 1/rate on top of
    the floor (the median of the other samples); the other N − k samples are the measured ones
    outside the top k, so the expectation differs from the measurement only by the stall.
    """
    v = np.sort(np.asarray(measured_us, dtype=np.float64))
    k = min(round(rate * stall_s), v.size - 1)
    floor = v[: v.size - k]
    ramp = float(np.median(floor)) + (stall_s - np.arange(k) / rate) * 1e6
    return np.concatenate([floor, ramp])


def percentile_curve(latencies_us: Sequence[float], max_nines: float = 6.0) -> tuple[Any, Any]:
    """x = 1/(1−p) up to 10**max_nines or the sample count, y = nearest rank (s), ending at max."""
    v = np.sort(np.asarray(latencies_us, dtype=np.float64)) / 1e6
    n = v.size
    x = np.logspace(0, math.log10(min(10**max_nines, float(n))), 400)
    ranks = np.clip(np.ceil(np.round((1 - 1 / x) * n, 6)).astype(np.int64), 1, n)
    ranks[-1] = n  # end the curve at the max, which is where the story is
    return x, v[ranks - 1]


def expectation(measured_us: Sequence[int], rate: float, stall_s: float) -> dict[str, Any]:
    """The expected curve (x = 1/(1−p)) and table values, for the report."""
    exp_us = expected_samples_us(measured_us, rate, stall_s)
    k = round(rate * stall_s)
    floor_s = float(np.median(exp_us[: exp_us.size - k])) / 1e6
    x, y = percentile_curve(exp_us)
    return {
        "label": f"expected, open loop (S/T of messages wait U(0, {stall_s:.2f} s] + floor)",
        "derivation": (
            f"Expected for an open-loop measurement: {exp_us.size:,} messages at {rate:g}/s, of "
            f"which {k:,} were intended during the {stall_s:.2f} s stall (measured between "
            f"SIGSTOP and SIGCONT) and must wait {stall_s:.2f} s, {stall_s - 1 / rate:.3f} s, … "
            f"on top of the floor ({floor_s * 1e3:.2f} ms, the median of the open-loop prober's "
            "other samples, which stand for themselves)."
        ),
        "x": [float(v) for v in x],
        "latency_s": [float(v) for v in y],
        "quantiles_s": {str(q): nearest_rank(exp_us.astype(np.int64), q) for q in CO_QUANTILES},
    }


def summarise(label: str, latencies_us: list[int], expected: dict[str, Any]) -> dict[str, Any]:
    """One prober's quantiles and their error against the expectation."""
    qs = {str(q): nearest_rank(latencies_us, q) for q in CO_QUANTILES}
    return {
        "label": label,
        "samples": len(latencies_us),
        "quantiles_s": qs,
        "rel_error": {
            q: (v - expected["quantiles_s"][q]) / expected["quantiles_s"][q] for q, v in qs.items()
        },
        "latencies_us": latencies_us,
    }


def corrected_for_expected_interval(latencies_us: Sequence[int], interval_us: int) -> list[int]:
    """HdrHistogram (Java)'s ``recordValueWithExpectedInterval``: back-fill the skipped sends.

    For each sample v above the interval, also record v − i, v − 2i, … while ≥ i: a guess, after
    the fact, of what the missing open-loop samples would have been.
    """
    out: list[int] = []
    for v in latencies_us:
        out.append(int(v))
        missing = int(v) - interval_us
        while interval_us > 0 and missing >= interval_us:
            out.append(missing)
            missing -= interval_us
    return out


# --- adapters to the probe and the naive prober (testkit/) --------------------------


class _Side:
    """One prober in the race: start it, stop it, then read its latencies (µs)."""

    label: str

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def latencies_us(self) -> list[int]: ...


class _NinesProbe(_Side):
    """nines' ``probes.ProbeAgent``; latencies from its echo records on the echo topic."""

    label = "nines open-loop probe (probes.ProbeAgent)"

    def __init__(self, bootstrap: str, topic: str, echo_topic: str, rate: float) -> None:
        from probes import ProbeAgent
        from probes.config import ProbeConfig

        self.bootstrap, self.echo_topic = bootstrap, echo_topic
        self.probe_id = f"bench-co-{time.time_ns()}"
        self.agent = ProbeAgent(
            ProbeConfig(
                bootstrap=bootstrap,
                topic=topic,
                echo_topic=echo_topic,
                rate=rate,
                metrics_port=0,
                probe_id=self.probe_id,
                cluster="bench",
            )
        )
        self.stats: Any = None

    def start(self) -> None:
        self.agent.start()

    def stop(self) -> None:
        self.agent.stop()
        self.stats = _jsonable(self.agent.stats())

    def latencies_us(self) -> list[int]:
        return _read_echo_latencies(self.bootstrap, self.echo_topic, self.probe_id)


class _ClosedLoop(_Side):
    """The naive closed-loop prober (``testkit.naive``), in its own thread."""

    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        from testkit.naive import NaiveProber

        self._samples: list[int] = []
        self._naive = NaiveProber(bootstrap, topic, 0, interval_s=1 / rate)
        self.label = "naive closed-loop prober (testkit.naive)"

    def start(self) -> None:
        self._naive.start()

    def stop(self) -> None:
        self._samples = list(self._naive.stop())

    def latencies_us(self) -> list[int]:
        return list(self._samples)


def _read_echo_latencies(
    bootstrap: str, topic: str, probe_id: str, timeout_s: float = 20.0
) -> list[int]:
    """End-to-end latencies (µs, lost = timeout) of one probe's echo records on the echo topic."""
    from confluent_kafka import Consumer, KafkaError

    from core.echo import Echo, decode_record

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-co-{time.time_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    out: list[int] = []
    deadline = time.monotonic() + timeout_s
    idle_since = time.monotonic()
    try:
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                if out and time.monotonic() - idle_since > 3.0:
                    break
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise RuntimeError(f"echo consumer: {msg.error()}")
            idle_since = time.monotonic()
            rec = decode_record(msg.value())
            if isinstance(rec, Echo) and rec.probe == probe_id and rec.end_to_end_us is not None:
                out.append(int(rec.end_to_end_us))
    finally:
        c.close()
    return out


def _stall(broker: Any, scenario: Scenario, t0: float) -> float:
    """SIGSTOP the broker at ``stall_at_s`` for ``stall_s``; return the measured stall."""
    time.sleep(max(0.0, t0 + scenario.stall_at_s - time.monotonic()))
    a = time.monotonic()
    broker.pause()
    time.sleep(scenario.stall_s)
    broker.resume()
    return time.monotonic() - a


def run_co(quick: bool = False, scenario: Scenario | None = None) -> dict[str, Any]:
    """Run the CTRL+Z scenario against a real embedded broker and write ``co.json``."""
    from testbroker import EmbeddedBroker

    sc = scenario or (QUICK if quick else Scenario())
    probe_topic, echo_topic, naive_topic = "bench.probe", "bench.echoes", "bench.naive"
    topics = [(probe_topic, 1), (echo_topic, 1), (naive_topic, 1)]
    with EmbeddedBroker(brokers=1, topics=topics) as broker:
        open_loop = _NinesProbe(broker.bootstrap, probe_topic, echo_topic, sc.rate)
        closed_loop = _ClosedLoop(broker.bootstrap, naive_topic, sc.rate)
        open_loop.start()
        closed_loop.start()
        t0 = time.monotonic()
        stall_s = _stall(broker, sc, t0)
        time.sleep(max(0.0, t0 + sc.run_s - time.monotonic()))
        closed_loop.stop()
        open_loop.stop()
        time.sleep(sc.drain_s)
        nines_us = open_loop.latencies_us()
        naive_us = closed_loop.latencies_us()
    if not nines_us or not naive_us:
        raise RuntimeError(f"no latencies read back (open {len(nines_us)}, closed {len(naive_us)})")
    exp = expectation(nines_us, sc.rate, stall_s)
    payload = {
        "benchmark": "co",
        "quick": quick,
        "title": f"CTRL+Z: broker SIGSTOPped {stall_s:.2f} s, {sc.rate:g} msgs/s, {sc.run_s:g} s",
        "setup": (
            f"One `EmbeddedBroker` (1 broker). The {open_loop.label} and the {closed_loop.label} "
            f"run at the same time at {sc.rate:g} msgs/s each for {sc.run_s:g} s; the broker "
            f"process is SIGSTOPped at {sc.stall_at_s:g} s for {stall_s:.2f} s, then SIGCONTed. "
            "Open-loop latencies are measured from the intended send time (nines' probe: the "
            "end-to-end latency of its echo records, decoded with "
            "`core.echo.decode_record`); closed-loop latencies are the prober's own "
            "samples."
        ),
        "scenario": sc.__dict__,
        "stall_s": stall_s,
        "quantiles": [str(q) for q in CO_QUANTILES],
        "expected": exp,
        "nines": summarise(open_loop.label, nines_us, exp),
        "naive": summarise(closed_loop.label, naive_us, exp),
        "naive_corrected": summarise(
            "closed-loop + HdrHistogram expected-interval correction",
            corrected_for_expected_interval(naive_us, round(1e6 / sc.rate)),
            exp,
        ),
        "open_loop_stats": getattr(open_loop, "stats", None),
    }
    write_result("co", payload)
    return payload


def _jsonable(obj: Any) -> Any:
    """Stats objects as plain JSON values (dataclasses, mappings, numbers)."""
    import dataclasses

    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _jsonable(dataclasses.asdict(obj))
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, int | float | str | bool) or obj is None:
        return obj
    return repr(obj)
