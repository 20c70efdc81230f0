"""Publishing what the executor produces (PROTOCOL.md sections 6 and 8): results (a shadow
executor's to ``{prefix}.shadow-results``), log lines, dead letters and beats, through one
idempotent producer.

Results and dead letters wait for the broker's acknowledgement, retrying retriable errors,
because a trigger's offset is committed only once its answer is out. A run's log records are
produced together and waited for together (``publish_logs``): its result goes out only after
the broker acknowledged them, and a record the producer could not deliver within its own
retries (``delivery.timeout.ms``, 30 s unless the client configuration says otherwise) is
dropped, logged and counted (``log_records_dropped``), so a log never holds a result back for
longer than that. Beats do not wait: the next one carries the same news.

Every record goes out through ``_produce``, which signs it with the executor key
(``signing.ExecutorKey``, PROTOCOL.md section 3) over the topic it is produced to, so no kind
of record can leave unsigned while a key is set. Any ``kadence.executor.*`` header a record
already carries is dropped first: the scheduler reads only one of each name.
"""

import logging
import threading
import time

from confluent_kafka import KafkaError, Producer

from . import codec
from .signing import EXECUTOR_KEY, EXECUTOR_SIGNATURE

log = logging.getLogger("kadence_executor")

DLQ_REASON = "kadence.dlq.reason"
DLQ_TOPIC = "kadence.dlq.topic"
DLQ_PARTITION = "kadence.dlq.partition"
DLQ_OFFSET = "kadence.dlq.offset"
_SIGNING_HEADERS = (EXECUTOR_KEY, EXECUTOR_SIGNATURE)


class Publisher:
    """Owns the producer and a thread that serves its delivery reports; signs with
    `executor_key` (None: unsigned, ``allow_unsigned``)."""

    def __init__(self, client_config, prefix, results_topic=None, executor_key=None):
        config = dict(client_config)
        config.update({"enable.idempotence": True, "acks": "all", "linger.ms": 2})
        if "delivery.timeout.ms" not in config and "message.timeout.ms" not in config:
            # As the Rust SDK: how long a log record may hold a result back at most.
            config["delivery.timeout.ms"] = 30_000
        self.producer = Producer(config)
        #: Log records the broker did not take; their lines are lost.
        self.log_records_dropped = 0
        self._dropped_lock = threading.Lock()
        self.executor_key = executor_key
        # A shadow executor's results go to {prefix}.shadow-results (Settings.results_topic).
        self.results_topic = results_topic or f"{prefix}.results"
        self.logs_topic = f"{prefix}.logs"
        self.beats_topic = f"{prefix}.beats"
        self.dlq_topic = f"{prefix}.dlq"
        self._closed = threading.Event()
        self._poller = threading.Thread(target=self._serve_reports, daemon=True)
        self._poller.start()

    def _serve_reports(self):
        while not self._closed.is_set():
            self.producer.poll(0.05)

    def _produce(self, topic, key, value, headers=None, on_delivery=None):
        """The one way a record leaves: signed (when there is a key) over `topic` and `value`."""
        if self.executor_key is not None:
            kept = [header for header in headers or () if header[0] not in _SIGNING_HEADERS]
            headers = kept + self.executor_key.headers(topic, value)
        self.producer.produce(
            topic, value=value, key=key, headers=headers, on_delivery=on_delivery
        )

    def send(self, topic, key, value, give_up, headers=None):
        """Sends until the broker acknowledges (True) or a non-retriable error or `give_up`
        (an Event) stops it (False, logged)."""
        backoff = 0.1
        while True:
            delivered = threading.Event()
            outcome = {}

            def report(error, _message, outcome=outcome, delivered=delivered):
                outcome["error"] = error
                delivered.set()

            try:
                self._produce(topic, key, value, headers, on_delivery=report)
            except BufferError:
                outcome["error"] = KafkaError(KafkaError._QUEUE_FULL)
                delivered.set()
            while not delivered.wait(0.05):
                if give_up.is_set():
                    return False
            error = outcome["error"]
            if error is None:
                return True
            if not _retriable(error) or give_up.is_set():
                log.error("cannot publish to %s: %s", topic, error)
                return False
            log.warning("publish to %s failed (%s); retrying", topic, error)
            if give_up.wait(backoff):
                return False
            backoff = min(backoff * 2, 5.0)

    def publish_result(self, result, give_up, headers=None):
        """Publishes a result; ``headers`` carry its ``traceparent`` (see ``traceparent``)."""
        value = codec.encode("ResultRecord", result)
        return self.send(self.results_topic, result["trigger_id"], value, give_up, headers)

    def publish_logs(self, records, give_up):
        """Produces every LogRecord of `records`, then waits until the broker answered each
        (or `give_up`, an Event, is set); returns how many it acknowledged. Nothing is retried
        past the producer's own retries: a record it could not deliver is dropped, logged and
        counted."""
        reports = []
        for record in records:
            delivered = threading.Event()
            outcome = {"error": None}

            def report(error, _message, outcome=outcome, delivered=delivered):
                outcome["error"] = error
                delivered.set()

            value = codec.encode("LogRecord", record)
            while True:
                try:
                    self._produce(self.logs_topic, record["trigger_id"], value, on_delivery=report)
                    break
                except BufferError:
                    # The producer's queue is full: wait for room (its reports free it).
                    if give_up.wait(0.005):
                        outcome["error"] = "the executor stopped waiting (hard stop)"
                        delivered.set()
                        break
            reports.append((record, delivered, outcome))
        acknowledged = 0
        for record, delivered, outcome in reports:
            while not delivered.wait(0.05):
                if give_up.is_set():
                    outcome["error"] = "the executor stopped waiting (hard stop)"
                    break
            if outcome["error"] is None:
                acknowledged += 1
            else:
                with self._dropped_lock:
                    self.log_records_dropped += 1
                log.warning(
                    "cannot ship job log lines %d.. of %s (%s); they are dropped",
                    record["first_line"], record["trigger_id"], outcome["error"],
                )
        return acknowledged

    def dead_letter(self, message, reason, give_up):
        """Sends a record that cannot be taken to the DLQ, with its key, bytes and headers,
        then the reason and its origin (PROTOCOL.md section 8). The original's ``kadence.dlq.*``
        and executor signature headers are left off: the dead letter sets its own."""
        kept = [
            (name, value) for name, value in message.headers() or ()
            if not name.startswith("kadence.dlq.") and name not in _SIGNING_HEADERS
        ]
        headers = kept + [
            (DLQ_REASON, reason.encode()),
            (DLQ_TOPIC, message.topic().encode()),
            (DLQ_PARTITION, str(message.partition()).encode()),
            (DLQ_OFFSET, str(message.offset()).encode()),
        ]
        return self.send(self.dlq_topic, message.key(), message.value(), give_up, headers)

    def beat(self, beat):
        """Sends a beat without waiting for it."""
        try:
            value = codec.encode("ExecutorBeat", beat)
            self._produce(self.beats_topic, beat["executor_id"], value)
        except (BufferError, codec.CodecError) as error:
            log.warning("cannot send a beat: %s", error)

    def close(self, timeout_s=10.0):
        """Delivers what is queued (the last beat), then stops serving reports."""
        deadline = time.monotonic() + timeout_s
        while len(self.producer) and time.monotonic() < deadline:
            self.producer.flush(0.1)
        self._closed.set()
        self._poller.join()


def _retriable(error):
    return error.retriable() or error.code() in (
        KafkaError._QUEUE_FULL,
        KafkaError._MSG_TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
    )
