"""Each default is written once, on the stage's model; the chart and the docs are checked by it.

The chart writes the ``probe:`` and ``stream:`` config files its pods read; rendered with its own
defaults, every setting it writes must mean the model's default, except the overrides listed here
by name with the reason. docs/configuration.md's key, flag and default columns are generated from
the models (tests/unit/settings_tables.py --write).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml
from settings_tables import DOC, render, tables

from core.config import build

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "nines"

#: Settings the chart sets on purpose to something else than the model's default, and why (the
#: required ``bootstrap`` is the values' example cluster in both).
CHART_OVERRIDES: dict[str, dict[str, str]] = {
    "probe": {
        "cluster": "the values' example cluster name (prod)",
        "metrics_host": "0.0.0.0: Prometheus scrapes the pod from outside it",
    },
    "stream": {
        "metrics_host": "0.0.0.0: Prometheus scrapes the pod from outside it",
        "checkpoint": "on the stream volume, so restarts are exactly once",
        "archive": "on the stream volume (stream.archive: true)",
        "archive_max_size": "a share of the stream volume (archiveVolumePercent)",
    },
}
#: Per scenario, overrides on top of those: ``master: ""`` lets spark-submit choose in
#: spark-operator mode.
SCENARIO_OVERRIDES = {
    "default-values": {},
    "msk-iam-values": {
        stage: {"kafka_login": "kafkaLogin: aws-msk-iam", "aws_region": "awsRegion"}
        for stage in ("probe", "stream")
    },
    "spark-operator-values": {"stream": {"master": "'': spark-submit sets it"}},
    "oidc-values": {
        stage: {"kafka_login": "kafkaLogin: oidc", "kafka": "the client credentials, TLS"}
        for stage in ("probe", "stream")
    },
}


def chart_sections(scenario: str) -> dict[str, dict[str, Any]]:
    """The ``probe:`` and ``stream:`` sections the chart writes for a ci/ scenario."""
    values = helm.values_from_yaml((CHART / "ci" / f"{scenario}.yaml").read_text()) or {}
    out = helm.Chart.load(str(CHART)).render(values, name="nines", namespace="monitoring")
    sections: dict[str, dict[str, Any]] = {}
    for name, text in out.items():
        if name.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            for key, body in ((doc or {}).get("data") or {}).items():
                if key in ("probe.yaml", "stream.yaml"):
                    sections.setdefault(key.removesuffix(".yaml"), yaml.safe_load(body))
    return {stage: body[stage] for stage, body in sections.items()}


@pytest.mark.parametrize("scenario", sorted(SCENARIO_OVERRIDES))
def test_the_chart_writes_the_models_defaults_but_its_named_overrides(scenario: str) -> None:
    sections = chart_sections(scenario)
    assert set(sections) == {"probe", "stream"}
    for stage, (model, _) in tables().items():
        written = build(model, sections[stage], prefix=stage)
        required = {k: v for k, v in sections[stage].items() if model.model_fields[k].is_required()}
        default = build(model, required, prefix=stage)
        differ = {k for k in model.model_fields if getattr(written, k) != getattr(default, k)}
        expected = CHART_OVERRIDES[stage] | SCENARIO_OVERRIDES[scenario].get(stage, {})
        # exact: a new override is named here, and one that became the default leaves the list
        assert differ == set(expected), (stage, sorted(differ))
        assert set(sections[stage]) - set(model.model_fields) == set(), stage


def test_an_override_left_off_the_list_is_caught() -> None:
    model, _ = tables()["stream"]
    section = chart_sections("default-values")["stream"]
    changed = build(model, {**section, "peak_hold": "3m"})
    default = build(model, {"bootstrap": section["bootstrap"]})
    differ = {k for k in model.model_fields if getattr(changed, k) != getattr(default, k)}
    assert "peak_hold" in differ - set(CHART_OVERRIDES["stream"])


def test_the_docs_settings_tables_are_generated_from_the_models() -> None:
    doc = DOC.read_text(encoding="utf-8")
    assert render(doc) == doc, "run: PYTHONPATH=$PWD python tests/unit/settings_tables.py --write"


def test_a_stale_default_in_the_docs_is_caught() -> None:
    doc = DOC.read_text(encoding="utf-8")
    stale = doc.replace(
        "| `watermark` | `--watermark` | 2m |", "| `watermark` | `--watermark` | 1m |"
    )
    assert stale != doc
    assert render(stale) == doc


def test_a_probe_entry_without_a_setting_gets_the_models_default_not_the_charts() -> None:
    """The chart writes only what a ``probes[]`` entry sets: the default stays on the model."""
    from probes.config import ProbeConfig

    values = {"probes": [{"cluster": "c1", "bootstrap": "kafka-a:9092"}]}
    out = helm.Chart.load(str(CHART)).render(values, name="nines", namespace="monitoring")
    (probe,) = [
        yaml.safe_load(body)["probe"]
        for name, text in out.items()
        if not name.endswith("NOTES.txt")
        for doc in yaml.safe_load_all(text)
        if doc
        for key, body in (doc.get("data") or {}).items()
        if key == "probe.yaml"
    ]
    assert not {"topic", "rate", "size", "loss_timeout"} & set(probe)
    written, default = build(ProbeConfig, probe), ProbeConfig(bootstrap="kafka-a:9092")
    assert (written.topic, written.rate, written.size, written.loss_timeout) == (
        default.topic, default.rate, default.size, default.loss_timeout)  # fmt: skip


def test_the_spark_operator_driver_gets_the_streams_jvm_options_default() -> None:
    """spark-submit starts the driver's JVM before the job reads ``jvm_options``: the chart
    passes the same flags as ``spark.driver.extraJavaOptions``."""
    from streaming.config import StreamConfig

    values = helm.values_from_yaml((CHART / "ci" / "spark-operator-values.yaml").read_text())
    out = helm.Chart.load(str(CHART)).render(values or {}, name="nines", namespace="monitoring")
    apps = [
        doc
        for name, text in out.items()
        if not name.endswith("NOTES.txt")
        for doc in yaml.safe_load_all(text)
        if isinstance(doc, dict) and doc.get("kind") == "SparkApplication"
    ]
    assert len(apps) == 1
    conf = apps[0]["spec"]["sparkConf"]
    assert conf["spark.driver.extraJavaOptions"] == StreamConfig.model_fields["jvm_options"].default
