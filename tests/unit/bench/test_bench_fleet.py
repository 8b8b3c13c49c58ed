"""The fleet-cost bench: its per-broker arithmetic, echo quantiles, and the report section."""

from __future__ import annotations

from bench.fleet_cost import Case, latencies, merged, per_broker_rates, plan, thread_groups
from bench.report_fleet import estimate_rows, fleet_model, replicas_needed, section
from bench.run import PARTS, RUNNERS
from core.echo import Echo
from core.echo_v2 import encode_batch

T0 = 1_700_000_000_000_000


def echo(seq: int, e2e_us: int, probe: str = "fleet-x", lost: bool = False) -> Echo:
    at = T0 + seq * 100_000
    return Echo(probe, "bench", "nines.probe", seq % 3, 1, seq, 512, at, at + 50, at + 300,
                None if lost else at + e2e_us, lost, 30_000_000 if lost else None)  # fmt: skip


def test_requests_per_broker_count_every_probed_broker_even_a_silent_one() -> None:
    before = {"1": 10.0, "2": 10.0, "bootstrap": 3.0}
    after = {"1": 110.0, "2": 30.0, "3": 8.0, "bootstrap": 900.0}
    assert per_broker_rates(before, after, 4, 10.0) == {"mean": 3.2, "max": 10.0, "min": 0.0}


def test_thread_groups_split_librdkafka_broker_threads_from_the_rest() -> None:
    got = thread_groups(
        {"rdk:broker1": 1.0, "rdk:broker1000": 2.0, "rdk:main": 0.5, "python": 3.0, "probe-x": 1}
    )
    assert got == {"rdk_broker": 3.0, "rdk_other": 0.5, "python": 4.0}


def test_latencies_take_the_window_of_one_probe_and_count_a_lost_message_at_its_timeout() -> None:
    batch = encode_batch([echo(k, 1000 + k) for k in range(20)] + [echo(20, 0, lost=True)])
    other = encode_batch([echo(5, 9_999_999, probe="someone-else")])
    got = latencies([batch, other, b"\x00junk", None], "fleet-x", T0 + 500_000, T0 + 2_100_001)
    # seqs 5..21 intended in the window: 5..19 received, 20 lost (30 s)
    assert (got["echoes"], got["lost"], got["bad_records"]) == (16, 1, 2)
    assert got["e2e_us"]["p50"] == 1012 and got["e2e_us"]["max"] == 30_000_000


def test_cases_keep_the_rate_per_broker_whatever_the_partitions() -> None:
    assert Case(100, 300).rate_per_partition * Case(100, 300).per_broker == 10.0
    assert (Case(1000, 100).probed_brokers, Case(1000, 100).per_broker) == (100, 1.0)
    full = plan(quick=False)
    assert {c.brokers for c in full["scale"]} == {10, 100, 1000}
    assert "fleet" in PARTS and "fleet" in RUNNERS


def run(brokers: int, probed: int, core: float, group: str = "scale") -> dict[str, object]:
    return {
        "lever": "baseline", "brokers": brokers, "partitions": probed, "probed_brokers": probed,
        "partitions_per_broker": 1.0, "schedule": "staggered", "kafka": {},
        "msgs_per_s": probed * 10,
        "core": core, "core_per_broker": core / probed,
        "core_by_thread": {"rdk_broker": core / 2, "rdk_other": 0.0, "python": core / 2},
        "produce_requests_per_broker_s": {"mean": 10.0, "max": 11.0, "min": 9.0},
        "produce_requests_per_broker_tick": 1.0,
        "consumer_requests_per_broker_s": {"mean": 90.0, "max": 91.0, "min": 80.0},
        "e2e_us": {"p50": 5000, "p99": 50_000, "p999": 90_000, "max": 100_000},
        "measured_s": 20.0, "cold": {"start_s": 5.0, "cpu_s": 1.0}, "load_1m": [10.0, 12.0],
        "threads": 4000, "rss_mib": 900, "totals": {"sent": 1000}, "lost": 0,
        "echoes": probed * 10 * 20,
    }  # fmt: skip


def test_fleet_model_from_the_rows_that_kept_their_schedule_and_the_verdict() -> None:
    behind = {**run(1000, 1000, 0.9), "lost": 17_574}  # sent them all, read too few back
    runs = {"scale": [run(10, 10, 0.122), run(100, 100, 0.32), behind],
            "replica": [run(1000, 100, 0.5)],
            "levers": [{"lever": "aligned ticks", "brokers": 1000, "partitions": 1000,
                        "error": "RuntimeError: probe did not start"},
                       {**run(100, 100, 0.25), "lever": "linger.ms 100",
                        "kafka": {"linger.ms": "100"}, "produce_requests_per_broker_tick": 0.5},
                       {**run(100, 300, 0.3), "lever": "3 partitions per broker",
                        "partitions_per_broker": 3.0, "probed_brokers": 100,
                        "produce_requests_per_broker_tick": 3.0}]}  # fmt: skip
    model = fleet_model(runs)
    assert model is not None and model["rows"] == 3
    got = (model["base"], model["per_known"], model["per_probed"])
    assert all(abs(a - b) < 1e-9 for a, b in zip(got, (0.1, 0.0002, 0.002), strict=True))
    # a replica: 0.1 + 1,000 × 0.2 m + 1,000 / R × 2 m; at most one core from R = 3
    assert replicas_needed(model) == 3
    assert any("| 3 |" in r and "**2.90**" in r for r in estimate_rows(model))
    text = section({"runs": runs})
    assert "One probe did not keep up with 1,000 brokers" in text
    assert "**3 replicas, 2.90 cores**" in text and "missed by 45%" in text
    assert "(the default layout) that kept its schedule: worst **1.00**" in text
    assert "worst **3.00** (3 partitions per broker, 100 brokers);" in text
    assert "failed: RuntimeError: probe did not start" in text
    assert text.count("| baseline | 1,000 | 1,000 × 1 | 1 | staggered |") == 1
    assert "| linger.ms 100 | baseline | 1.00 → **0.50** | 90 → 90 | 0.320 → 0.250 |" in text
    fewer = "| 1 partition per broker instead of 3 | 3 partitions per broker | 3.00 → **1.00** |"
    assert fewer in text
    assert "Not measured yet" in section({})


def test_a_rerun_case_replaces_its_row_and_keeps_the_others() -> None:
    old = {"scale": [run(10, 10, 0.1), run(1000, 1000, 2.5)], "replica": [run(1000, 100, 0.7)]}
    new = {"scale": [run(10, 10, 0.2)], "levers": [run(100, 100, 0.3)]}
    got = merged(old, new)
    assert [r["core"] for r in got["scale"]] == [0.2, 2.5]
    assert [r["core"] for r in got["replica"]] == [0.7]
    assert [r["core"] for r in got["levers"]] == [0.3]
