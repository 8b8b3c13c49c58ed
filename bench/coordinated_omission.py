"""The CTRL+Z test, side by side: nines' open-loop probe vs a naive closed-loop prober.

Both probe one real ``EmbeddedBroker`` at the same rate while the broker process is SIGSTOPped
once. An open-loop measurement must see a fraction S/T of its messages wait S − t (uniform on
(0, S]) on top of the floor; the closed-loop prober waits with the broker and records one slow
sample. Writes ``bench/results/co.json`` with both raw latency lists and the expectation.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.machine import PartSkipped, write_result
from monitor.core.hdr import rank_for_quantile

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


def expected_open_loop(
    samples: int, rate: float, stall_s: float, floor_s: float, q: float
) -> float:
    """What an open-loop probe must report at quantile q (seconds), from the arithmetic alone.

    The k = rate·S messages intended during the stall wait S, S − 1/rate, … on top of the
    floor; every other message waits the floor. Nearest rank r among ``samples``: the
    (samples − r)-th from the top, if it falls among the k stalled ones.
    """
    k = round(rate * stall_s)
    above = samples - (samples if q >= 1.0 else rank_for_quantile(q, samples))
    if above >= k:
        return floor_s
    return floor_s + stall_s - above / rate


def expectation(samples: int, rate: float, stall_s: float, floor_s: float) -> dict[str, Any]:
    """The expected curve (x = 1/(1−p)) and table values, for the report."""
    x = np.logspace(0, math.log10(max(samples, 2)), 300)
    curve = [expected_open_loop(samples, rate, stall_s, floor_s, 1 - 1 / xi) for xi in x]
    return {
        "label": f"expected, open loop (S/T of messages wait U(0, {stall_s:.2f} s] + floor)",
        "derivation": (
            f"Expected for an open-loop measurement: {samples:,} messages at {rate:g}/s, of which "
            f"{rate * stall_s:,.0f} were intended during the {stall_s:.2f} s stall (measured "
            f"between SIGSTOP and SIGCONT) and wait {stall_s:.2f} s, {stall_s - 1 / rate:.3f} s, "
            f"… on top of the floor ({floor_s * 1e3:.2f} ms, nines' median outside the stall)."
        ),
        "x": [float(v) for v in x],
        "latency_s": curve,
        "quantiles_s": {
            str(q): expected_open_loop(samples, rate, stall_s, floor_s, q) for q in CO_QUANTILES
        },
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


# --- adapters to the probe and the naive prober (owned by probes/) --------------------------


def _imports() -> tuple[Any, Any, Any]:
    """The probe agent, its config and the naive prober, or a skip naming what is missing."""
    try:
        from probes.config import ProbeConfig

        from probes import ProbeAgent
    except ImportError as exc:
        raise PartSkipped(f"probes.ProbeAgent has not landed yet ({exc})") from None
    try:
        from probes import naive
    except ImportError as exc:
        raise PartSkipped(f"probes.naive has not landed yet ({exc})") from None
    return ProbeAgent, ProbeConfig, naive


def _read_echo_latencies(bootstrap: str, topic: str, timeout_s: float = 15.0) -> list[int]:
    """End-to-end latencies (µs, lost = timeout) of every echo record on the echo topic."""
    from confluent_kafka import Consumer, KafkaError

    from monitor.core.echo import Echo, decode_record

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
            if isinstance(rec, Echo) and rec.end_to_end_us is not None:
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
    probe_agent, probe_config, naive = _imports()
    from monitor.broker import EmbeddedBroker

    sc = scenario or (QUICK if quick else Scenario())
    probe_topic, echo_topic, naive_topic = "bench.probe", "bench.echoes", "bench.naive"
    topics = [(probe_topic, 1), (echo_topic, 1), (naive_topic, 1)]
    with EmbeddedBroker(brokers=1, topics=topics) as broker:
        agent = probe_agent(
            _probe_config(probe_config, broker.bootstrap, probe_topic, echo_topic, sc.rate)
        )
        naive_samples: list[int] = []
        naive_run: Callable[[threading.Event], None] = _naive_runner(
            naive, broker.bootstrap, naive_topic, sc.rate, naive_samples
        )
        stop = threading.Event()
        thread = threading.Thread(target=naive_run, args=(stop,), daemon=True)
        agent.start()
        thread.start()
        t0 = time.monotonic()
        stall_s = _stall(broker, sc, t0)
        time.sleep(max(0.0, t0 + sc.run_s - time.monotonic()))
        stop.set()
        thread.join(timeout=30)
        time.sleep(sc.drain_s)
        agent.stop()
        stats = _jsonable(agent.stats())
        nines_us = _read_echo_latencies(broker.bootstrap, echo_topic)
    if not nines_us:
        raise RuntimeError("no echo records read back from the echo topic")
    outside = np.asarray(nines_us)
    floor_s = float(np.median(outside[outside < 1_000_000])) / 1e6
    exp = expectation(len(nines_us), sc.rate, stall_s, floor_s)
    payload = {
        "benchmark": "co",
        "quick": quick,
        "title": f"CTRL+Z: broker SIGSTOPped {stall_s:.2f} s, {sc.rate:g} msgs/s, {sc.run_s:g} s",
        "setup": (
            f"One `EmbeddedBroker` (1 broker), nines' `ProbeAgent` (open loop) and the naive "
            f"closed-loop prober (`probes.naive`) running at the same time at {sc.rate:g} msgs/s "
            f"each for {sc.run_s:g} s; the broker process is SIGSTOPped at {sc.stall_at_s:g} s for "
            f"{stall_s:.2f} s. nines' latencies are the end-to-end latencies of its echo records "
            "(decoded with `monitor.core.echo.decode_record`); the naive prober's are its own "
            "samples."
        ),
        "scenario": sc.__dict__,
        "stall_s": stall_s,
        "quantiles": [str(q) for q in CO_QUANTILES],
        "expected": exp,
        "nines": summarise("nines open-loop probe", nines_us, exp),
        "naive": summarise("naive closed-loop prober", naive_samples, exp),
        "probe_stats": stats,
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


def _probe_config(config_cls: Any, bootstrap: str, topic: str, echo_topic: str, rate: float) -> Any:
    """A probe config for one partition at ``rate``; adapted to ``probes.config.ProbeConfig``."""
    return config_cls(bootstrap=bootstrap, topic=topic, echo_topic=echo_topic, rate=rate)


def _naive_runner(
    naive: Any, bootstrap: str, topic: str, rate: float, samples: list[int]
) -> Callable[[threading.Event], None]:
    """A callable that runs the naive prober until the event is set, appending its samples."""

    def go(stop: threading.Event) -> None:
        prober = naive.NaiveProber(bootstrap=bootstrap, topic=topic, rate=rate)
        while not stop.is_set():
            samples.append(int(prober.probe_once_us()))

    return go
