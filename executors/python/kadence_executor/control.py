"""The control topic (PROTOCOL.md section 5): ``{prefix}.control``, partition 0, read without
a consumer group from its beginning, keeping this app's commands of the last kill memory.

The reader says when it has read up to the end offset it found at start (``caught_up``): the
executor takes no trigger before that, so a KILL sent while no executor was up still covers
its triggers. If the end cannot be learnt or reached within the patience given, it says so
anyway (logged) rather than keep the executor idle. A record that fails verification or
decoding is logged and skipped.
"""

import logging
import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from . import codec
from .signing import VerifyError

log = logging.getLogger("kadence_executor")


class ControlReader(threading.Thread):
    """Forwards this app's commands to ``on_command`` and calls ``on_caught_up`` once."""

    def __init__(self, settings, on_command, on_caught_up):
        super().__init__(daemon=True, name="kadence-control")
        self.settings = settings
        self.topic = f"{settings.topic_prefix}.control"
        self.on_command = on_command
        self.on_caught_up = on_caught_up
        self.stopped = threading.Event()
        self._told = False

    def run(self):
        # librdkafka wants a group id even for assigned partitions; nothing is committed.
        config = dict(self.settings.client_config())
        config.update(
            {
                "group.id": f"{self.settings.topic_prefix}.control.{self.settings.executor_id}",
                "enable.auto.commit": False,
            }
        )
        consumer = Consumer(config)
        try:
            consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
            end = self._end_offset(consumer)
            if end is not None and end <= 0:
                self._caught_up()
            patience_ends = time.monotonic() + self.settings.session_timeout_ms / 1000
            while not self.stopped.is_set():
                if not self._told and time.monotonic() >= patience_ends:
                    log.warning("control commands not read to their end in time; taking triggers")
                    self._caught_up()
                message = consumer.poll(0.1)
                if message is None or message.error():
                    continue
                self._forward(message)
                if end is not None and message.offset() + 1 >= end:
                    self._caught_up()
        finally:
            consumer.close()

    def _end_offset(self, consumer):
        try:
            _, high = consumer.get_watermark_offsets(TopicPartition(self.topic, 0), timeout=10)
            return high
        except KafkaException as error:
            log.warning("cannot learn the end of the control topic: %s", error)
            return None

    def _caught_up(self):
        if not self._told:
            self._told = True
            self.on_caught_up()

    def _forward(self, message):
        trusted = self.settings.trusted_keys
        if trusted:
            try:
                trusted.verify(self.topic, message.partition(), message.value(), message.headers())
            except VerifyError as error:
                log.warning("ignoring a control record that fails verification: %s", error)
                return
        if message.value() is None:
            log.warning("skipping an empty control record at offset %s", message.offset())
            return
        try:
            command = codec.decode("ControlRecord", message.value())
        except codec.CodecError as error:
            log.warning("skipping an unreadable control record: %s", error)
            return
        oldest = time.time_ns() // 1_000_000 - self.settings.kill_memory_ms
        if command["app"] == self.settings.app and command["requested_at_ms"] >= oldest:
            self.on_command(command)
