"""Prometheus alerting and recording rules from an SLA, reading only the exported metrics.

Quantiles are never averaged: a quantile gauge is only compared (``max by``), and the burn-rate
alerts count slow messages from the cumulative histogram buckets, merged by adding counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client.utils import floatToGoString

from core.hdr import quantile_label
from core.sla import Objective, SlaConfig
from core.units import format_duration

#: Error-budget share consumed within the long window, (long, short) window, severity: the SRE
#: workbook's multi-window, multi-burn-rate table (2 % in 1h, 5 % in 6h pages; 10 % in 3d tickets).
BURN_RATE_WINDOWS: tuple[tuple[float, str, str, str], ...] = (
    (0.02, "1h", "5m", "page"),
    (0.05, "6h", "30m", "page"),
    (0.10, "3d", "6h", "ticket"),
)

#: Window over which the pipeline counters (late, bad, vanished, dropped echoes, send errors,
#: refused series) must not grow.
PIPELINE_RANGE = "10m"

#: NinesProbeBottleneck: the probe's send lag p99.9 (held peak of the finest window) above this,
#: while the probe paused longer than ``PROBE_BOTTLENECK_HICCUP_S`` or its cgroup was throttled
#: in more than ``PROBE_THROTTLED_RATIO`` of its CFS periods over ``PROBE_THROTTLED_RANGE``.
#: A healthy probe's send lag p99.9 is about 1 ms (docs/benchmarks.md); a slow broker alone
#: raises the send lag (a full producer queue) but neither the pauses nor the throttling.
PROBE_SEND_LAG_P999_S = 0.01
PROBE_BOTTLENECK_HICCUP_S = 0.01
#: kube-prometheus' CPUThrottlingHigh threshold (25 % of periods throttled over 5 m).
PROBE_THROTTLED_RATIO = 0.25
PROBE_THROTTLED_RANGE = "5m"
PROBE_BOTTLENECK_FOR = "2m"

RECORDING_GROUP = "nines-slo-recording"
SLA_GROUP = "nines-sla"
PIPELINE_GROUP = "nines-pipeline"

_RANGE_S = {"5m": 300, "30m": 1800, "1h": 3600, "6h": 21600, "3d": 259200}


def slow_ratio_record(window: str) -> str:
    """Name of the recorded fraction of probe messages slower than an objective's threshold."""
    return f"cluster_topic:nines_latency_slow_ratio:rate{window}"


def _num(value: float) -> str:
    """A PromQL number literal without float noise (0.001, not 0.0010000000000000009)."""
    return f"{round(value, 12):.12g}"


def _quote(value: str) -> str:
    """A PromQL string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _selector(metric: str, matchers: Mapping[str, str]) -> str:
    """``metric{a="x", b="y"}`` with matchers in a stable order."""
    inner = ", ".join(f"{key}={_quote(value)}" for key, value in matchers.items())
    return f"{metric}{{{inner}}}" if inner else metric


def _series(o: Objective, *, merged_partition: bool) -> dict[str, str]:
    """The cluster/topic/partition matchers of an objective.

    Gauges carry a ``partition="all"`` merge; counters and histogram buckets are merged in PromQL.
    """
    matchers: dict[str, str] = {}
    if o.cluster is not None:
        matchers["cluster"] = o.cluster
    if o.topic is not None:
        matchers["topic"] = o.topic
    if o.partition is not None:
        matchers["partition"] = o.partition
    elif merged_partition:
        matchers["partition"] = "all"
    return matchers


def _by(o: Objective) -> str:
    """The labels an objective's alerts keep: one alert per topic (and partition if chosen)."""
    return "cluster, topic, partition" if o.partition is not None else "cluster, topic"


def _where(o: Objective) -> str:
    """Alert text naming the series."""
    partition = "/{{ $labels.partition }}" if o.partition is not None else ""
    return "{{ $labels.cluster }}/{{ $labels.topic }}" + partition


def _read(o: Objective, window: str, held: str, latest: str) -> tuple[str, str]:
    """The family an objective's alert reads, and how its description names the window: the
    held peak (``held``) of the topic's windows, which a window closing between two scrapes
    cannot slip past; an objective on one partition has none, so its latest window (``latest``)."""
    if o.partition is None:
        return held, f"a {window} window closed lately"
    return latest, f"the latest closed {window} window"


def _hiccup_guard(sla: SlaConfig, o: Objective, window: str, *, over: str | None = None) -> str:
    """Clusters whose probe paused longer than the guard: their latency windows are suspect."""
    assert sla.probe_hiccup_max is not None
    matchers = {"kind": "hiccup", "window": window}
    if o.cluster is not None:
        matchers["cluster"] = o.cluster
    series = _selector("nines_latency_peak_seconds", matchers)
    if over is not None:
        series = f"max_over_time({series}[{over}])"
    return f"max by (cluster) ({series}) > {_num(sla.probe_hiccup_max)}"


def _guarded(sla: SlaConfig, o: Objective, expr: str, window: str, over: str | None = None) -> str:
    """``expr`` unless the probe itself hiccuped on that cluster (not a broker incident)."""
    if sla.probe_hiccup_max is None:
        return expr
    guard = _hiccup_guard(sla, o, window, over=over)
    return f"(\n{_indent(expr)}\n)\nunless on (cluster)\n(\n{_indent(guard)}\n)"


def _indent(expr: str) -> str:
    """Nest a multi-line expression two spaces deeper."""
    return "\n".join("  " + line for line in expr.splitlines())


def _alert(
    sla: SlaConfig,
    o: Objective,
    name: str,
    expr: str,
    summary: str,
    description: str,
    *,
    severity: str | None = None,
    for_s: float | None = None,
) -> dict[str, Any]:
    """One alerting rule with the house labels and annotations."""
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    wait = o.for_ if for_s is None else for_s
    if wait > 0:
        rule["for"] = format_duration(wait)
    rule["labels"] = {"severity": severity or o.severity, "slo": o.name}
    annotations = {"summary": o.summary or summary, "description": description}
    runbook = o.runbook_url or sla.runbook_url
    if runbook:
        annotations["runbook_url"] = runbook
    rule["annotations"] = annotations
    return rule


def _latency_alert(sla: SlaConfig, o: Objective) -> dict[str, Any]:
    """A window's quantile above the threshold (each window's own quantile, never averaged)."""
    assert o.quantile is not None and o.threshold is not None
    window = format_duration(o.window)
    qname = quantile_label(o.quantile)
    matchers = {
        "kind": o.kind,
        "window": window,
        "q": floatToGoString(o.quantile),
        **_series(o, merged_partition=True),
    }
    metric, which = _read(o, window, "nines_latency_peak_quantile_seconds", "nines_latency_seconds")
    expr = f"max by ({_by(o)}) ({_selector(metric, matchers)}) > {_num(o.threshold)}"
    limit = format_duration(o.threshold)
    return _alert(
        sla,
        o,
        "NinesLatencyQuantileHigh",
        _guarded(sla, o, expr, window),
        f"{o.kind} {qname} above {limit} ({window} windows)",
        f"{o.kind} {qname} latency on {_where(o)} is {{{{ $value | humanizeDuration }}}} in "
        f"{which}; objective: below {limit}.",
    )


def _max_alert(sla: SlaConfig, o: Objective) -> dict[str, Any]:
    """The exact max of a window above the limit."""
    assert o.max is not None
    window = format_duration(o.window)
    matchers = {"kind": o.kind, "window": window, **_series(o, merged_partition=True)}
    metric, which = _read(o, window, "nines_latency_peak_seconds", "nines_latency_max_seconds")
    expr = f"max by ({_by(o)}) ({_selector(metric, matchers)}) > {_num(o.max)}"
    limit = format_duration(o.max)
    return _alert(
        sla,
        o,
        "NinesLatencyMaxHigh",
        _guarded(sla, o, expr, window),
        f"{o.kind} max latency above {limit} ({window} windows)",
        f"{o.kind} max latency on {_where(o)} is {{{{ $value | humanizeDuration }}}} in "
        f"{which}; objective: below {limit}.",
    )


def _broker_alert(sla: SlaConfig, o: Objective) -> dict[str, Any]:
    """The objective's quantile or max on one broker's messages (its send-time leader series).

    One alert per (cluster, topic, broker): a slow broker is named even when its partitions move
    to other brokers, and the topic's own alert cannot say which broker it is.
    """
    window = format_duration(o.window)
    matchers = {"kind": o.kind, "window": window}
    which = f"a {window} window closed lately"
    if o.max is not None:
        name, metric, limit_s, stat = "NinesBrokerLatencyMaxHigh", "peak_seconds", o.max, "max"
    else:
        assert o.quantile is not None and o.threshold is not None
        name, metric, limit_s = (
            "NinesBrokerLatencyQuantileHigh",
            "peak_quantile_seconds",
            o.threshold,
        )
        stat = quantile_label(o.quantile)
        matchers["q"] = floatToGoString(o.quantile)
    matchers.update(_series(o, merged_partition=False))
    series = _selector(f"nines_broker_latency_{metric}", matchers)
    expr = f"max by (cluster, topic, broker) ({series}) > {_num(limit_s)}"
    limit = format_duration(limit_s)
    return _alert(
        sla,
        o,
        name,
        _guarded(sla, o, expr, window),
        f"{o.kind} {stat} latency above {limit} on broker {{{{ $labels.broker }}}} "
        f"({window} windows)",
        f"{o.kind} {stat} latency of the messages broker {{{{ $labels.broker }}}} led on "
        f"{_where(o)} is {{{{ $value | humanizeDuration }}}} in {which}; objective: below "
        f"{limit}.",
    )


def _loss_alert(sla: SlaConfig, o: Objective) -> dict[str, Any]:
    """Lost probe messages as a fraction of all probe messages over the window."""
    assert o.loss_ratio is not None
    window = format_duration(o.window)
    series = _series(o, merged_partition=False)
    lost = _selector("nines_lost_total", series)
    echoes = _selector("nines_echoes_total", series)
    by = _by(o)
    expr = (
        f"sum by ({by}) (rate({lost}[{window}]))\n"
        f"/\nsum by ({by}) (rate({echoes}[{window}]))\n"
        f"> {_num(o.loss_ratio)}"
    )
    limit = f"{round(o.loss_ratio * 100, 6):g} %"
    return _alert(
        sla,
        o,
        "NinesLossRatioHigh",
        expr,
        f"probe message loss above {limit} over {window}",
        f"{{{{ $value | humanizePercentage }}}} of probe messages on {_where(o)} were lost over "
        f"the last {window}; objective: below {limit}.",
    )


def _no_echoes_alerts(sla: SlaConfig, o: Objective) -> list[dict[str, Any]]:
    """Echoes stopped growing, or never appeared while the stream job runs."""
    assert o.no_echoes_for is not None
    span = format_duration(o.no_echoes_for)
    echoes = _selector("nines_echoes_total", _series(o, merged_partition=False))
    stopped = _alert(
        sla,
        o,
        "NinesEchoesStopped",
        # per partition even when none is chosen: one silent partition is an outage of its own
        f"sum by (cluster, topic, partition) (increase({echoes}[{span}])) == 0",
        f"no probe echoes for {span}",
        "No probe echoes were counted for {{ $labels.cluster }}/{{ $labels.topic }}/"
        f"{{{{ $labels.partition }}}} in the last {span}: the probe, the broker or the echo "
        "path is down there, and no latency is being measured.",
    )
    absent = _alert(
        sla,
        o,
        "NinesEchoesAbsent",
        f"absent({echoes})\nand on ()\ncount(nines_stream_last_batch_timestamp_seconds)",
        f"no probe echoes at all for {span}",
        f"The stream job runs but has never counted an echo matching {echoes}: "
        "no probe is measuring this target.",
        for_s=o.no_echoes_for,
    )
    return [stopped, absent]


def _burn_rate_alerts(sla: SlaConfig, o: Objective) -> list[dict[str, Any]]:
    """Multi-window, multi-burn-rate alerts on the fraction of messages slower than threshold."""
    assert o.objective is not None and o.threshold is not None
    budget = 1 - o.objective
    period = format_duration(o.slo_period)
    limit = format_duration(o.threshold)
    target = f"{round(o.objective * 100, 6):g} %"
    alerts = []
    for severity in ("page", "ticket"):
        clauses = []
        for share, long, short, sev in BURN_RATE_WINDOWS:
            if sev != severity:
                continue
            factor = _num(share * o.slo_period / _RANGE_S[long])
            parts = [
                f"{slow_ratio_record(w)}{{slo={_quote(o.name)}}} > ({factor} * {_num(budget)})"
                for w in (long, short)
            ]
            clauses.append(f"(\n  {parts[0]}\n  and\n  {parts[1]}\n)")
        expr = "\nor\n".join(clauses)
        if severity == "page":
            expr = _guarded(sla, o, expr, sla.finest_window, over="5m")
        fast = severity == "page"
        alerts.append(
            _alert(
                sla,
                o,
                "NinesLatencyBudgetBurn" if fast else "NinesLatencyBudgetBurnSlow",
                expr,
                f"{o.kind} latency error budget burning {'fast' if fast else 'steadily'} "
                f"(SLO {target} under {limit} over {period})",
                f"{{{{ $value | humanizePercentage }}}} of {o.kind} probe messages on {_where(o)} "
                f"were slower than {limit} over the long window; the SLO allows "
                f"{round(budget * 100, 6):g} % over {period}.",
                severity=severity,
                for_s=0.0,
            )
        )
    return alerts


def _recording_rules(o: Objective) -> list[dict[str, Any]]:
    """Fraction of probe messages slower than the threshold, per burn-rate window."""
    assert o.threshold is not None
    base = {"kind": o.kind, **_series(o, merged_partition=False)}
    count = _selector("nines_latency_classic_seconds_count", base)
    bucket = _selector(
        "nines_latency_classic_seconds_bucket", {**base, "le": floatToGoString(o.threshold)}
    )
    by = _by(o)
    rules = []
    for window in sorted({w for _, long, short, _ in BURN_RATE_WINDOWS for w in (long, short)},
                         key=_RANGE_S.__getitem__):  # fmt: skip
        total = f"sum by ({by}) (rate({count}[{window}]))"
        fast = f"sum by ({by}) (rate({bucket}[{window}]))"
        rules.append(
            {
                "record": slow_ratio_record(window),
                "expr": f"(\n  {total}\n  -\n  {fast}\n)\n/\n{total}",
                "labels": {"slo": o.name},
            }
        )
    return rules


def _pipeline_alerts(sla: SlaConfig) -> list[dict[str, Any]]:
    """The stream job is alive, and nothing is lost silently on the way to the histograms."""
    runbook = {"runbook_url": sla.runbook_url} if sla.runbook_url else {}
    stale = format_duration(sla.stream_stale_after)

    def rule(
        name: str, expr: str, severity: str, summary: str, description: str, wait: str = ""
    ) -> dict[str, Any]:
        return {
            "alert": name,
            "expr": expr,
            **({"for": wait} if wait else {}),
            "labels": {"severity": severity},
            "annotations": {"summary": summary, "description": description, **runbook},
        }

    rules = [
        rule(
            "NinesStreamStale",
            "time() - max(nines_stream_last_batch_timestamp_seconds)"
            f" > {_num(sla.stream_stale_after)}",
            "page",
            f"nines stream job finished no micro-batch for {stale}",
            "The last micro-batch finished {{ $value | humanizeDuration }} ago: the latency "
            "gauges are frozen and no alert on them can fire.",
        ),
        rule(
            "NinesStreamDown",
            "absent(nines_stream_last_batch_timestamp_seconds)",
            "page",
            "nines stream job is not exporting metrics",
            "Prometheus has no nines_stream_last_batch_timestamp_seconds: the stream job is down "
            "or not scraped, so no latency is measured.",
            stale,
        ),
        rule(
            "NinesEchoOffsetsLost",
            "sum by (topic, partition) "
            f"(increase(nines_data_loss_offsets_total[{PIPELINE_RANGE}])) > 0",
            "ticket",
            "echo records vanished before the stream job read them",
            "{{ $value | humanize }} offsets of echo topic {{ $labels.topic }}/"
            "{{ $labels.partition }} expired (retention) before the stream job read them.",
        ),
        rule(
            "NinesEchoOffsetsReset",
            "sum by (topic, partition) "
            f"(increase(nines_offsets_reset_total[{PIPELINE_RANGE}])) > 0",
            "ticket",
            "the echo topic's offsets went back under the stream job",
            "Echo topic {{ $labels.topic }}/{{ $labels.partition }} ended below the offset the "
            "stream job had read: deleted and recreated, or truncated (unclean leader election). "
            "Its new records are read; echoes of the old log not yet read are lost, uncounted.",
        ),
        rule(
            "NinesLateEchoes",
            f"sum by (cluster, topic) (increase(nines_late_echoes_total[{PIPELINE_RANGE}])) > 0",
            "ticket",
            "echoes arrived behind the watermark and are in no window",
            "{{ $value | humanize }} echoes for {{ $labels.cluster }}/{{ $labels.topic }} arrived "
            "behind the watermark: counted, but in no latency window (raise --watermark?).",
        ),
        rule(
            "NinesBadEchoes",
            f"sum by (reason) (increase(nines_bad_echoes_total[{PIPELINE_RANGE}])) > 0",
            "ticket",
            "echo records counted and skipped",
            "{{ $value | humanize }} echo records skipped ({{ $labels.reason }}): malformed, "
            "from a clock ahead, or beyond the series cap (series_cap).",
        ),
        rule(
            "NinesLatencyOverflow",
            "sum by (cluster, topic, kind) "
            f"(increase(nines_latency_overflow_total[{PIPELINE_RANGE}])) > 0",
            "ticket",
            "latency samples above the histogram's highest trackable value",
            "{{ $value | humanize }} {{ $labels.kind }} samples on {{ $labels.cluster }}/"
            "{{ $labels.topic }} exceeded the histogram's highest trackable value: counted, "
            "but in no bucket or quantile.",
        ),
        rule(
            "NinesSeriesRefused",
            f"sum by (job, instance) (increase(nines_series_rejected_total[{PIPELINE_RANGE}])) > 0",
            "ticket",
            "the exporter refused new series at its max_series cap",
            "{{ $value | humanize }} closed windows of new series were refused by "
            "{{ $labels.instance }}: echoes from an unexpected source, or max_series too small.",
        ),
        rule(
            "NinesProbeEchoesDropped",
            "sum by (job, instance) "
            f"(increase(nines_probe_echo_dropped_total[{PIPELINE_RANGE}])) > 0",
            "ticket",
            "the probe dropped echo records: its bounded echo buffer was full",
            "{{ $value | humanize }} echo records were dropped by the probe {{ $labels.instance }} "
            "because the echo cluster did not keep up: the stream job never saw those "
            "measurements, so the latency tail is thinner than measured.",
        ),
        rule(
            "NinesProbeSendErrors",
            "sum by (cluster, topic, error) "
            f"(increase(nines_probe_send_errors_total[{PIPELINE_RANGE}])) > 0",
            "ticket",
            "probe messages failed to be produced",
            "{{ $value | humanize }} probe messages to {{ $labels.cluster }}/{{ $labels.topic }} "
            "failed to be produced ({{ $labels.error }}): they were never measured.",
        ),
        rule(
            "NinesProbeReceiveErrors",
            "sum by (cluster, topic, error) "
            f"(increase(nines_probe_receive_errors_total[{PIPELINE_RANGE}])) > 0",
            "ticket",
            "the probe may not read its messages back",
            "{{ $value | humanize }} reads of {{ $labels.cluster }}/{{ $labels.topic }} were "
            "refused ({{ $labels.error }}): the probe's principal lacks a right it needs "
            "(docs/deploy.md, Least privilege); its messages are counted lost.",
        ),
        rule(
            "NinesProbeAdminErrors",
            "sum by (cluster, op, error) "
            f"(increase(nines_probe_admin_errors_total[{PIPELINE_RANGE}])) > 0",
            "ticket",
            "the cluster refused the probe's topic management",
            "{{ $value | humanize }} {{ $labels.op }} calls on {{ $labels.cluster }} were refused "
            "({{ $labels.error }}): a broker that joined stays unprobed until the probe's "
            "principal has the right (docs/deploy.md, Least privilege) or a partition is added.",
        ),
        rule(
            "NinesProbeTokenFailures",
            "sum by (cluster, login) "
            f"(increase(nines_probe_token_failures_total[{PIPELINE_RANGE}])) > 0",
            "ticket",
            "the probe's Kafka clients could not get an OAUTHBEARER token",
            "{{ $value | humanize }} token requests of the probe on {{ $labels.cluster }} "
            "({{ $labels.login }}) failed: the issuer refused or did not answer. The clients "
            "keep their token until it expires; then the probe cannot reach the brokers and "
            "its messages are lost.",
        ),
        rule(
            "NinesProbeArrivalsDropped",
            "sum by (job, instance) "
            f"(increase(nines_probe_arrivals_dropped_total[{PIPELINE_RANGE}])) > 0",
            "ticket",
            "probe messages came back but were dropped before the tracker saw them",
            "{{ $value | humanize }} probe messages came back to {{ $labels.instance }} but its "
            "bounded arrival queue was full (NATS): they are counted lost, not measured.",
        ),
        rule(
            "NinesScrapeGaps",
            f"sum by (instance) (increase(nines_scrape_gaps_total[{PIPELINE_RANGE}])) > 0",
            "ticket",
            "a scrape came later than the held peak lasts",
            "{{ $value | humanize }} scrapes of {{ $labels.instance }} came more than the "
            "stream's peak_hold after the same scraper's previous one: a window's max may have "
            "come and gone unseen (scrape more often, or raise peak_hold).",
        ),
        rule(
            "NinesProbeBrokerUnprobed",
            "max by (cluster) (nines_probe_brokers_unprobed) > 0",
            "ticket",
            "a broker leads no probe partition: its latency is not measured",
            "{{ $value }} broker(s) of {{ $labels.cluster }} lead no partition of the probe "
            "topic, so nothing measures them: add partitions (or run the probe with "
            "--manage-topic).",
            "10m",
        ),
    ]
    if sla.probe_hiccup_max is not None:
        hiccups = _selector(
            "nines_latency_peak_seconds", {"kind": "hiccup", "window": sla.finest_window}
        )
        rules.append(
            rule(
                "NinesProbeHiccup",
                f"max by (cluster) ({hiccups}) > {_num(sla.probe_hiccup_max)}",
                "ticket",
                f"probe paused longer than {format_duration(sla.probe_hiccup_max)}",
                "The probe on {{ $labels.cluster }} paused for {{ $value | humanizeDuration }} "
                "(GC, CPU starvation, SIGSTOP): latency windows there are untrustworthy and "
                "latency pages for that cluster are suppressed.",
            )
        )
    return rules


def probe_bottleneck_expr(sla: SlaConfig) -> str:
    """The probe lags its own schedule while it pauses or is CPU-throttled: the probe, not the
    broker, is what limits the measurement on that cluster."""
    window = sla.finest_window
    lag = _selector(
        "nines_latency_peak_quantile_seconds",
        {"kind": "send_lag", "partition": "all", "window": window, "q": floatToGoString(0.999)},
    )
    hiccups = _selector("nines_latency_peak_seconds", {"kind": "hiccup", "window": window})
    span = PROBE_THROTTLED_RANGE
    throttled = (
        f"rate(nines_probe_cgroup_cpu_throttled_periods_total[{span}])\n"
        f"  / rate(nines_probe_cgroup_cpu_periods_total[{span}])"
    )
    cause = (
        f"max by (cluster) ({hiccups}) > {_num(PROBE_BOTTLENECK_HICCUP_S)}\n"
        f"or\nmax by (cluster) (\n{_indent(throttled)}\n) > {_num(PROBE_THROTTLED_RATIO)}"
    )
    return (
        f"max by (cluster) ({lag}) > {_num(PROBE_SEND_LAG_P999_S)}\n"
        f"and on (cluster)\n(\n{_indent(cause)}\n)"
    )


def _probe_bottleneck_alert(sla: SlaConfig) -> dict[str, Any]:
    """NinesProbeBottleneck: see :func:`probe_bottleneck_expr`."""
    runbook = {"runbook_url": sla.runbook_url} if sla.runbook_url else {}
    return {
        "alert": "NinesProbeBottleneck",
        "expr": probe_bottleneck_expr(sla),
        "for": PROBE_BOTTLENECK_FOR,
        "labels": {"severity": "ticket"},
        "annotations": {
            "summary": "the probe, not the broker, limits the measurement",
            "description": "The probe on {{ $labels.cluster }} sends "
            "{{ $value | humanizeDuration }} behind its schedule (send lag p99.9) while it "
            "pauses or its cgroup is CPU-throttled: its latencies there include the probe's "
            "own delay. Give it CPU (raise its limit, move it off a busy node) or lower --rate.",
            **runbook,
        },
    }


def render_rules(sla: SlaConfig) -> dict[str, Any]:
    """A Prometheus rules file (``{"groups": [...]}``) for the SLA."""
    recording: list[dict[str, Any]] = []
    alerts: list[dict[str, Any]] = []
    for o in sla.objectives:
        kind = o.kind_of_objective
        if kind == "latency":
            alerts.append(_latency_alert(sla, o))
            if o.partition is None:
                alerts.append(_broker_alert(sla, o))
            if o.objective is not None:
                recording.extend(_recording_rules(o))
                alerts.extend(_burn_rate_alerts(sla, o))
        elif kind == "max":
            alerts.append(_max_alert(sla, o))
            if o.partition is None:
                alerts.append(_broker_alert(sla, o))
        elif kind == "loss_ratio":
            alerts.append(_loss_alert(sla, o))
        else:
            alerts.extend(_no_echoes_alerts(sla, o))
    groups = []
    if recording:
        groups.append({"name": RECORDING_GROUP, "rules": recording})
    groups.append({"name": SLA_GROUP, "rules": alerts})
    groups.append(
        {"name": PIPELINE_GROUP, "rules": [*_pipeline_alerts(sla), _probe_bottleneck_alert(sla)]}
    )
    return {"groups": groups}


def render_prometheus_rule(
    sla: SlaConfig,
    name: str = "nines",
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The same groups as a prometheus-operator ``PrometheusRule`` resource."""
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    metadata["labels"] = {
        "app.kubernetes.io/name": "nines",
        "app.kubernetes.io/component": "alerts",
        **(labels or {}),
    }
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": metadata,
        "spec": render_rules(sla),
    }


__all__ = [
    "BURN_RATE_WINDOWS",
    "probe_bottleneck_expr",
    "render_prometheus_rule",
    "render_rules",
    "slow_ratio_record",
]
