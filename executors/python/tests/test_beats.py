"""The executor's beats (PROTOCOL.md section 9), without Kafka: each one lists the protocol
features this SDK supports, so it goes as ExecutorBeat v2 (4002), and the scheduler may sign the
app's triggers by the round (section 3)."""

import unittest

from kadence_executor import codec

from .test_executor_keys import loop


class BeatsListTheirFeatures(unittest.TestCase):
    def produced_beat(self, made):
        (record,) = made.publisher.producer.records
        topic, value, _headers = record
        self.assertEqual(topic, "kadence.beats")
        return value

    def test_a_beat_lists_round_signatures_and_is_written_as_v2(self):
        made = loop()
        made._beat("RUNNING")
        value = self.produced_beat(made)
        self.assertEqual(value[:5], b"\x00\x00\x00\x0f\xa2")  # id 4002
        decoded = codec.decode("ExecutorBeat", value)
        self.assertEqual(decoded["features"], ["round-signatures"])
        self.assertEqual(decoded["state"], "RUNNING")

    def test_the_last_beat_of_a_stop_lists_round_signatures_too(self):
        # The beat ``Loop._finish`` sends once the consumer has left the group.
        made = loop()
        last = made._beat_record("STOPPING", [], [])
        self.assertEqual(last["features"], ["round-signatures"])
        self.assertEqual(codec.writer_id("ExecutorBeat", last), 4002)

    def test_a_shadow_sends_no_beat_to_list_them_in(self):
        made = loop(shadow=True)
        made._beat("RUNNING")
        self.assertEqual(made.publisher.producer.records, [])


if __name__ == "__main__":
    unittest.main()
