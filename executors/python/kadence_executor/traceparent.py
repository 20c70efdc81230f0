"""Trace context (PROTOCOL.md section 3): a result continues the trace its trigger started.

A trigger's ``traceparent`` header (W3C Trace Context) names the scheduler's dispatch span.
The result goes out with a ``traceparent`` of the same trace id and flags and a span id of
this executor's own: random, since this executor exports no spans of its own; the id stands
for its part of the run, and the scheduler's completion span becomes its child. A trigger
without a valid header gets a result without one.
"""

import os
import re

HEADER = "traceparent"

# version-traceid-parentid-flags; a later version may append fields after these.
_FORMAT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")


def parse(headers):
    """(trace id, flags) of the ``traceparent`` among ``headers`` (a list of (key, bytes)
    pairs, as confluent-kafka gives them), or None when there is no valid one."""
    for key, value in headers or ():
        if key != HEADER or value is None:
            continue
        try:
            text = value.decode("ascii") if isinstance(value, bytes) else value
        except UnicodeDecodeError:
            return None
        found = _FORMAT.match(text.strip())
        if found is None:
            return None
        version, trace_id, span_id, flags, rest = found.groups()
        if version == "ff" or (version == "00" and rest):
            return None
        if trace_id == "0" * 32 or span_id == "0" * 16:
            return None
        return trace_id, flags
    return None


def answer_header(trigger_headers):
    """The headers of the answer to a trigger that came with ``trigger_headers``: its
    ``traceparent`` under a span id of this executor's own, or none."""
    parsed = parse(trigger_headers)
    if parsed is None:
        return []
    trace_id, flags = parsed
    span_id = "0" * 16
    while span_id == "0" * 16:
        span_id = os.urandom(8).hex()
    return [(HEADER, f"00-{trace_id}-{span_id}-{flags}".encode("ascii"))]
