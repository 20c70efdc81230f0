"""Where the trigger consumer starts a partition it has just been assigned (the Rust SDK's
``kadence_kafka::resume``, the same rule).

Apache Kafka serves a fetch from the record batch that holds the fetch offset, and the client
drops the records before it, so a member resumes exactly at its group's committed offset.
tansu 0.6, the development broker, serves such a fetch from the *next* batch. The executor
commits the lowest trigger not yet answered, which is often inside a batch (runs handed back at
a rebalance), so on tansu the member that resumed there never saw the rest of that batch.

With ``broker_kind="tansu"`` (``Settings.broker_kind``), ``ResumePoints.assign`` starts each
assigned partition the group has an offset for up to ``REWIND`` records before it (never
before the log start) and ``admits`` drops what arrives below it. On Kafka (the default) it
assigns nothing itself and drops nothing: the re-read would cost up to ``REWIND`` records per
partition at every assignment for nothing.
"""

import logging
import threading

from confluent_kafka import KafkaException, TopicPartition

log = logging.getLogger("kadence_executor")

# More than a batch holds: a producer's batch is at most batch.size (1 MB by default) and
# Kadence's records are a few hundred bytes.
REWIND = 10_000


class ResumePoints:
    def __init__(self, broker_kind, topic, cooperative):
        self.enabled = broker_kind == "tansu"
        self.topic = topic
        self.cooperative = cooperative
        self.lock = threading.Lock()
        self.pending = {}  # partition -> committed offset, until a record at or past it arrives

    def assign(self, consumer, partitions, timeout):
        """From ``on_assign``: on tansu, assigns ``partitions`` itself with their starts moved
        before the committed offsets (incrementally under a cooperative rebalance, as the
        client would). Elsewhere, or when a lookup fails, leaves the assignment to the client."""
        if not self.enabled:
            return
        ours = [p for p in partitions if p.topic == self.topic]
        try:
            committed = consumer.committed(
                [TopicPartition(self.topic, p.partition) for p in ours], timeout
            )
            starts = {}
            for tp in committed:
                if tp.offset < 0:
                    continue  # no committed offset: auto.offset.reset starts at an end
                low, _high = consumer.get_watermark_offsets(tp, timeout=timeout)
                start = max(low, tp.offset - REWIND)
                if start < tp.offset:
                    starts[tp.partition] = (start, tp.offset)
        except KafkaException as error:
            log.warning("cannot read the group's offsets to start before them (tansu); a "
                        "committed offset inside a record batch may skip the rest of it: %s", error)
            return
        for p in ours:
            if p.partition in starts:
                p.offset = starts[p.partition][0]
        with self.lock:
            self.pending.update({partition: resume for partition, (_, resume) in starts.items()})
        if self.cooperative:
            consumer.incremental_assign(partitions)
        else:
            consumer.assign(partitions)

    def admits(self, partition, offset):
        """Whether the record at ``offset`` of ``partition`` is the executor's to take: not one
        read again before the partition's committed offset."""
        if not self.enabled:
            return True
        with self.lock:
            resume = self.pending.get(partition)
            if resume is None:
                return True
            if offset < resume:
                return False
            del self.pending[partition]
            return True

    def forget(self, partitions):
        """Revoked partitions: whoever is assigned them next resumes afresh."""
        with self.lock:
            for partition in partitions:
                self.pending.pop(partition, None)
