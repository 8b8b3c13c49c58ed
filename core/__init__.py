"""The shared pure core: imports nothing from Kafka, Spark or prometheus_client."""

from core.echo import SCHEMA_VERSION, BadEcho, Echo, Hiccup, decode_record, encode_record
from core.hdr import HdrLayout, SparseHistogram
from core.units import parse_duration_s, parse_rate, parse_size_bytes

__all__ = [
    "SCHEMA_VERSION",
    "BadEcho",
    "Echo",
    "HdrLayout",
    "Hiccup",
    "SparseHistogram",
    "decode_record",
    "encode_record",
    "parse_duration_s",
    "parse_rate",
    "parse_size_bytes",
]
