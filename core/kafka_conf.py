"""librdkafka settings that nines' correctness rests on: pinned, and an override refused.

The ``kafka:`` pass-through is the user's for tuning (``acks``, ``linger.ms``,
``fetch.wait.max.ms``, security, ...). A few settings are not tuning: the stream source's offsets
are Spark's checkpoint's, its data-loss count needs ``auto.offset.reset: earliest``, and so on.
Those are listed here, once, and a ``kafka:`` key that would change one is refused in one line
(docs/configuration.md lists them). Setting a pinned key to the value nines uses is allowed.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator


@dataclass(frozen=True)
class Pin:
    """A pinned librdkafka setting: the value nines uses (None: derived from another field)."""

    value: str | None
    why: str


#: librdkafka spellings of a boolean.
_TRUE, _FALSE = {"true", "t", "1"}, {"false", "f", "0"}

#: The stream job's echo consumer (streaming/consume.py).
STREAM_PINNED: dict[str, Pin] = {
    "bootstrap.servers": Pin(None, "set it with stream.bootstrap"),
    "enable.auto.commit": Pin(
        "false", "Spark's checkpoint owns the offsets; a commit would replay or skip batches"
    ),
    "auto.offset.reset": Pin(
        "earliest",
        "an offset removed by retention restarts at the oldest one, and the gap is counted as "
        "nines_data_loss_offsets_total",
    ),
    "isolation.level": Pin(
        "read_committed",
        "librdkafka's default; the batch end offsets and the data-loss count are built and "
        "tested on it, and echo producers are never transactional",
    ),
    "enable.partition.eof": Pin("true", "the reader knows it reached a batch's end by it"),
}

#: The probe's producer, consumer and echo producer (probes/config.py ``clients``).
PROBE_PINNED: dict[str, Pin] = {
    "bootstrap.servers": Pin(None, "set it with probe.bootstrap and probe.echo_bootstrap"),
    "group.id": Pin(None, "the probe reads its partitions by assignment, as its own group"),
    "enable.auto.commit": Pin("false", "the probe writes nothing but its two topics"),
    "queue.buffering.max.messages": Pin(
        None, "bounded by rate and loss_timeout (probe) and echo_buffer (echoes)"
    ),
}

#: librdkafka settings that hold a secret. The Helm chart writes ``kafka:`` settings into a
#: ConfigMap, so its schema takes these only as ``env:VAR`` (from ``secretEnv``) or ``file:PATH``
#: references (a test derives that rule from this list).
SECRET_SETTINGS = (
    "sasl.password",
    "ssl.key.password",
    "ssl.keystore.password",
    "ssl.key.pem",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.config",
)

#: Tuning knobs, named in the refusal so the user sees what stays theirs.
TUNING = "acks, linger.ms, fetch.wait.max.ms"


def _same(value: str, pinned: str) -> bool:
    """Whether ``value`` is the pinned value as librdkafka reads it."""
    v = str(value).strip().lower()
    if pinned in ("true", "false"):
        return v in (_TRUE if pinned == "true" else _FALSE)
    return v == pinned


def check_pinned(settings: Mapping[str, str], pinned: Mapping[str, Pin]) -> dict[str, str]:
    """``settings`` unchanged, or ValueError naming the first key that overrides a pinned one.

    The message names the key, the value nines uses and why; never the user's value (a
    ``kafka:`` value may be a secret).
    """
    for key, value in settings.items():
        pin = pinned.get(str(key).strip().lower())
        if pin is None or (pin.value is not None and _same(value, pin.value)):
            continue
        fixed = f"nines sets it to {pin.value}" if pin.value is not None else "nines sets it"
        raise ValueError(
            f"{str(key).strip()} is pinned ({fixed}: {pin.why}); "
            f"tuning settings such as {TUNING} stay yours"
        )
    return dict(settings)


def _pinned_field(pinned: Mapping[str, Pin]) -> AfterValidator:
    """The one validator of every stage's ``kafka:`` field: ``check_pinned`` against ``pinned``."""
    return AfterValidator(functools.partial(check_pinned, pinned=pinned))


#: The stream job's ``kafka:`` field: what the source relies on is not tuning.
StreamKafka = Annotated[dict[str, str], _pinned_field(STREAM_PINNED)]
#: The probe's ``kafka:`` field: what the probe relies on is not tuning.
ProbeKafka = Annotated[dict[str, str], _pinned_field(PROBE_PINNED)]

__all__ = [
    "PROBE_PINNED",
    "SECRET_SETTINGS",
    "STREAM_PINNED",
    "TUNING",
    "Pin",
    "ProbeKafka",
    "StreamKafka",
    "check_pinned",
]
