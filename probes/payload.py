"""The probe message: a header (who, partition, seq, intended time) and random padding.

Random padding keeps compression from making large messages artificially cheap.
"""

from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass

from probes.config import HEADER_BYTES

MAGIC = b"NIN1"
# magic, probe-id hash (8 bytes), partition, seq, intended_us; padded to HEADER_BYTES
_HEADER = struct.Struct(">4s8siqq")


def probe_hash(probe_id: str) -> bytes:
    """8 bytes identifying a probe in its messages."""
    return hashlib.blake2b(probe_id.encode(), digest_size=8).digest()


@dataclass(frozen=True, slots=True)
class ProbeMessage:
    """What a probe message says about itself."""

    probe: bytes
    partition: int
    seq: int
    intended_us: int


def encode(probe: bytes, partition: int, seq: int, intended_us: int, size: int) -> bytes:
    """A payload of exactly ``size`` bytes."""
    head = _HEADER.pack(MAGIC, probe, partition, seq, intended_us)
    return head + b"\0" * (HEADER_BYTES - len(head)) + os.urandom(size - HEADER_BYTES)


def decode(value: bytes | None) -> ProbeMessage | None:
    """The header of a probe payload, or None if it is not one."""
    if value is None or len(value) < _HEADER.size or value[:4] != MAGIC:
        return None
    _, probe, partition, seq, intended_us = _HEADER.unpack_from(value)
    return ProbeMessage(probe, partition, seq, intended_us)
