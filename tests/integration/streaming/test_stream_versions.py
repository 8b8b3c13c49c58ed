"""One Spark version everywhere: the pyspark `make setup` installs, the image's pin and the
chart's Spark Operator mode; and the jar `make setup` builds is the one the job loads."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pyspark
import yaml

from streaming import aggregator_jar

ROOT = Path(__file__).resolve().parents[3]


def test_the_image_the_chart_and_setup_pin_the_same_spark() -> None:
    values = yaml.safe_load((ROOT / "helm/nines/values.yaml").read_text())
    chart = values["stream"]["sparkOperator"]["sparkVersion"]
    image = re.search(r"ARG SPARK_VERSION=(\S+)", (ROOT / "Dockerfile").read_text())
    assert image is not None
    assert chart == image.group(1) == pyspark.__version__


def test_the_aggregator_jar_is_built_from_these_sources() -> None:
    jar = Path(aggregator_jar.resolve())
    assert jar.is_file() and jar.stat().st_size > 1000
    if not os.environ.get(aggregator_jar.JAR_ENV):  # else the user's (or image's) own jar
        assert jar == aggregator_jar.cache_file()  # named by the hash of jvm/aggregator's sources
