"""The stream job's settings as the source's Spark options: one encoder, one decoder, no defaults.

Spark hands a data source strings only, with their names lower-cased, and pickles them to the
executors. ``encode_options`` writes each setting the source reads as JSON under its config name
(the windows and the HDR layout in their own ``to_option`` form), and ``decode_options`` reads
them back with the type they had in ``StreamConfig``: ``max_clock_skew`` stays seconds, an int
stays an int. A missing option is an error naming it, never a second copy of a default.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from core.hdr import HdrLayout
from core.kafka_conf import hide_secrets, reveal
from core.windows import WindowSpec

if TYPE_CHECKING:
    from streaming.config import StreamConfig

#: Seconds a read waits on a partition that stops answering before it fails the batch (not a
#: setting: tests shorten it through ``encode_options``).
STALL_TIMEOUT_S = 600.0
#: The StreamConfig fields the source reads, each under its own name.
SETTINGS = (
    "bootstrap",
    "echo_topic",
    "starting_offsets",
    "max_records_per_batch",
    "max_clock_skew",
    "max_series",
    "kafka",
    "kafka_login",
    "aws_region",
)


@dataclass(frozen=True)
class SourceOptions:
    """What the source reads, typed as in ``StreamConfig`` (seconds stay seconds)."""

    bootstrap: str
    echo_topic: str
    starting_offsets: str
    max_records_per_batch: int
    max_clock_skew: float
    max_series: int
    kafka: dict[str, str | SecretStr]
    kafka_login: str
    aws_region: str | None
    checkpoint: str | None
    #: Spark tasks per micro-batch at most (the job passes the default parallelism).
    max_input_partitions: int
    stall_timeout_s: float
    windows: WindowSpec
    layout: HdrLayout


#: Options written with their own ``to_option`` (the others as JSON).
_OWN_FORM = ("windows", "layout")


def encode_options(
    config: StreamConfig,
    checkpoint: str | None,
    max_input_partitions: int,
    stall_timeout_s: float = STALL_TIMEOUT_S,
) -> dict[str, str]:
    """The source's Spark options for ``config`` (read back by ``decode_options``)."""
    values = {name: getattr(config, name) for name in SETTINGS}
    values["kafka"] = reveal(config.kafka)  # Spark's options are strings: typed again on read
    values |= {
        "checkpoint": checkpoint,
        "max_input_partitions": max_input_partitions,
        "stall_timeout_s": stall_timeout_s,
    }
    options = {name: json.dumps(value) for name, value in values.items()}
    options |= {"windows": config.spec.to_option(), "layout": config.layout.to_option()}
    return options


def decode_options(options: Mapping[str, str]) -> SourceOptions:
    """The settings back from Spark's (case-insensitive) options; ValueError names a missing one."""
    opts = {k.lower(): v for k, v in options.items()}
    missing = [f.name for f in dataclasses.fields(SourceOptions) if f.name not in opts]
    if missing:
        raise ValueError(
            f"the nines-kafka source needs option {missing[0]}: build them with encode_options"
        )
    values: dict[str, Any] = {
        f.name: json.loads(opts[f.name])
        for f in dataclasses.fields(SourceOptions)
        if f.name not in _OWN_FORM
    }
    values["kafka"] = hide_secrets(values["kafka"])
    return SourceOptions(
        **values,
        windows=WindowSpec.from_option(opts["windows"]),
        layout=HdrLayout.from_option(opts["layout"]),
    )


__all__ = ["SETTINGS", "STALL_TIMEOUT_S", "SourceOptions", "decode_options", "encode_options"]
