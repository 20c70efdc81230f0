"""A run's log records (PROTOCOL.md section 6), without Kafka: at most 500 lines and 256 KiB
of line text each, long lines cut and saying so, every record naming its run (the result's
``started_at_ms``), produced before the result, and a record the broker never takes dropped
after the producer's delivery timeout instead of holding the result back."""

import threading
import time
import unittest

from kadence_executor import codec
from kadence_executor.consumer import Pending
from kadence_executor.dispatch import Stop
from kadence_executor.publishing import Publisher
from kadence_executor.runs import MAX_LINE_BYTES, MAX_RECORD_LINE_BYTES, JobLogger, log_records

from .test_codec import trigger
from .test_executor_keys import loop


class RecordSizes(unittest.TestCase):
    def test_a_record_holds_at_most_256_kib_of_line_text(self):
        # 1 000 lines of 4 000 bytes: 65 to a record, not 500 (2 MB, over Kafka's 1 MB).
        lines = [f"line {i} ".ljust(4_000, "x") for i in range(1, 1_001)]
        records = list(log_records(trigger(), "e", 1_500, 1, lines))
        expected_first = 1
        for record in records:
            self.assertEqual(record["first_line"], expected_first)
            self.assertLessEqual(sum(len(line.encode()) for line in record["lines"]),
                                 MAX_RECORD_LINE_BYTES)
            expected_first += len(record["lines"])
        self.assertEqual([len(r["lines"]) for r in records[:-1]], [65] * (len(records) - 1))
        self.assertEqual([line for r in records for line in r["lines"]], lines)

    def test_short_lines_go_500_to_a_record(self):
        records = list(log_records(trigger(), "e", 1_500, 11, ["short"] * 501))
        self.assertEqual([(r["first_line"], len(r["lines"])) for r in records], [(11, 500), (511, 1)])

    def test_a_long_line_is_cut_at_a_character_boundary_and_says_so(self):
        logger = JobLogger(10)
        logger.log("é" * MAX_LINE_BYTES)
        _, (line,) = logger.take(True)
        self.assertEqual(line, "é" * (MAX_LINE_BYTES // 2) + f"… [cut at {MAX_LINE_BYTES} bytes]")


def write_lines(ctx):
    ctx.log("one")
    ctx.log("two")


class RecordsNameTheirRun(unittest.TestCase):
    def test_the_log_records_name_the_run_and_come_before_its_result(self):
        made = loop()
        made.handlers = {"report": write_lines}
        made.owned = {0}
        made.tracker.track(0, 41)
        made._run(Pending(trigger(), 0, 41), Stop())
        topics = [topic for topic, _, _ in made.publisher.producer.records]
        self.assertEqual(topics, ["kadence.logs", "kadence.results"])
        (_, log_value, _), (_, result_value, _) = made.publisher.producer.records
        self.assertEqual(log_value[:5], b"\x00\x00\x00\x13\x8a")  # LogRecord v2, id 5002
        log_record = codec.decode("LogRecord", log_value)
        result = codec.decode("ResultRecord", result_value)
        self.assertEqual(log_record["lines"], ["one", "two"])
        self.assertEqual(log_record["run_started_at_ms"], result["started_at_ms"])


class UndeliveredRecords(unittest.TestCase):
    def test_a_record_the_broker_never_takes_is_dropped_after_the_delivery_timeout(self):
        publisher = Publisher(
            {"bootstrap.servers": "127.0.0.1:9", "log_level": 0, "delivery.timeout.ms": 500},
            "kadence",
        )
        try:
            records = log_records(trigger(), "e", 1_500, 1, ["lost"])
            started = time.monotonic()
            with self.assertLogs("kadence_executor", level="WARNING") as logged:
                acknowledged = publisher.publish_logs(records, threading.Event())
            waited = time.monotonic() - started
        finally:
            publisher.close(timeout_s=0)
        self.assertEqual(acknowledged, 0)
        self.assertEqual(publisher.log_records_dropped, 1)
        self.assertLess(waited, 5.0, "held no longer than the delivery timeout (and a poll)")
        self.assertIn("cannot ship job log lines 1.. of 7-1000", logged.output[0])
