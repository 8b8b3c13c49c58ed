"""Parse and validate echo records, vectorised with pyarrow; exact reasons from the reference.

One module per format, each beside its reference decoder: ``v1_template`` (schema v1 in the
probes' own layout, numpy) and ``v1_json`` (any other v1 record: Arrow's JSON reader, then
``core.echo.decode_record``), ``v2`` (``core.echo_v2``'s batches); ``messages`` sends each Kafka
value to its format's parser; ``rows`` is what they all hand on.
"""

from streaming.parse.messages import parse_messages, parse_values
from streaming.parse.rows import PARSED_SCHEMA

__all__ = ["PARSED_SCHEMA", "parse_messages", "parse_values"]
