"""The reference Python executor of Kadence: register plain functions as handlers by name,
and the executor runs them when the scheduler triggers their jobs.

It implements the executor contract of ``schemas/PROTOCOL.md`` in full, on confluent-kafka
and fastavro. The tour:

- ``executor``: ``Executor`` (settings, handlers, ``run``, ``on_partitions``) and ``Settings``
  (``shadow``: a shadow executor, PROTOCOL.md section 10; ``group_protocol``: ``classic`` or
  Kafka's KIP-848 ``consumer`` protocol).
- ``consumer``: the loop: group membership, admission, commits, beats, rebalances (eager or
  incremental), drain.
- ``dispatch``: hold until the scheduled millisecond, block strategies, KILL bookkeeping,
  redelivery recognition; pure, tested without Kafka.
- ``runs``: one run: handler thread, timeout, stop reasons, job log, result record.
- ``control``: the control topic reader (KILL), caught up before the first trigger.
- ``publishing``: results, logs, dead letters and beats through one idempotent producer, each
  signed with the executor key.
- ``offsets``: commit only up to the lowest unanswered trigger.
- ``codec``: Confluent-framed Avro with the packaged schemas; ``signing``: Ed25519 checks of
  what the scheduler signs, and the executor key (HMAC) that signs what the executor writes.
- ``demo``: the executor the conformance suite drives (``python -m kadence_executor.demo``).
"""

from .executor import Executor, Settings
from .runs import JobContext, JobFailed

__all__ = ["Executor", "JobContext", "JobFailed", "Settings"]
