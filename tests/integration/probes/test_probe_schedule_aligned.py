"""``nines probe --schedule aligned``: every partition's message k is intended at the same
instant; the default (staggered) spreads them evenly over the interval. Read back from the
echoes of two real probes run side by side on the session's mock cluster (3 partitions)."""

from __future__ import annotations

import subprocess
import uuid
from collections import defaultdict

from kafka_cluster import Cluster
from probe_runs import RATE, ROOT, records_of

from monitor.processes import probe_argv


def intended_by_seq(bootstrap: str, probe_id: str) -> dict[int, dict[int, int]]:
    """seq → partition → intended_us, of every echo of one probe."""
    echoes, _ = records_of(bootstrap, probe_id)
    out: dict[int, dict[int, int]] = defaultdict(dict)
    for e in echoes:
        assert e.partition not in out[e.seq], "two echoes of one message"
        out[e.seq][e.partition] = e.intended_us
    return out


def test_aligned_schedule_sends_each_partitions_message_k_at_one_instant(broker: Cluster) -> None:
    tag = uuid.uuid4().hex[:6]
    runs = {}
    for schedule in ("aligned", "staggered"):
        probe_id = f"sched-{schedule}-{tag}"
        argv = probe_argv(broker.bootstrap, probe_id, "--rate", str(RATE), "--duration", "1s")
        runs[schedule] = (
            probe_id,
            subprocess.Popen(
                [*argv, "--schedule", schedule], cwd=ROOT, stderr=subprocess.PIPE, text=True
            ),
        )
    for _, proc in runs.values():
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    step_us = 1_000_000 // RATE
    for schedule, (probe_id, _) in runs.items():
        by_seq = intended_by_seq(broker.bootstrap, probe_id)
        assert len(by_seq) >= RATE * 0.9, (schedule, len(by_seq))  # a second's worth
        for seq, parts in by_seq.items():
            if len(parts) < 3:
                continue  # the last tick may end the duration between partitions
            t = sorted(parts.values())
            if schedule == "aligned":
                assert t[0] == t[-1], (seq, parts)
            else:  # partition i of 3 offset by i / (rate × 3)
                assert [parts[p] - parts[0] for p in (0, 1, 2)] == [
                    0,
                    step_us // 3,
                    2 * step_us // 3,
                ]
        # open loop either way: message k of a partition at t0 + k / rate
        first = by_seq[0][0]
        assert all(parts.get(0, first + seq * step_us) == first + seq * step_us
                   for seq, parts in by_seq.items()), schedule  # fmt: skip
