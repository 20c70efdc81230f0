"""Where the trigger consumer starts an assigned partition (``resume``), with a stand-in for the
consumer: on tansu, before the committed offset, dropping what comes before it; on Kafka, as the
client would. The e2e suites run both brokers."""

import unittest

from confluent_kafka import TopicPartition

from kadence_executor.resume import REWIND, ResumePoints

TOPIC = "kadence.triggers.billing"


class StandIn:
    """Answers committed offsets and log starts; records what it was asked to assign."""

    def __init__(self, committed, low=0):
        self.committed_offsets, self.low = committed, low
        self.assigned = self.incrementally = None

    def committed(self, partitions, timeout):
        return [TopicPartition(TOPIC, p.partition, self.committed_offsets.get(p.partition, -1001))
                for p in partitions]

    def get_watermark_offsets(self, tp, timeout):
        return self.low, 1_000_000

    def assign(self, partitions):
        self.assigned = [(p.partition, p.offset) for p in partitions]

    def incremental_assign(self, partitions):
        self.incrementally = [(p.partition, p.offset) for p in partitions]


def assignment(*partitions):
    return [TopicPartition(TOPIC, p) for p in partitions]


class OnTansu(unittest.TestCase):
    def test_partitions_start_before_the_committed_offset_and_drop_what_precedes_it(self):
        points = ResumePoints("tansu", TOPIC, cooperative=False)
        consumer = StandIn({0: 25, 1: 50_000}, low=10)
        points.assign(consumer, assignment(0, 1, 2), timeout=1)
        starts = dict(consumer.assigned)
        self.assertEqual(starts[0], 10, "never before the log start")
        self.assertEqual(starts[1], 50_000 - REWIND)
        self.assertLess(starts[2], 0, "no committed offset: left to auto.offset.reset")
        self.assertFalse(points.admits(0, 24))
        self.assertTrue(points.admits(2, 0))
        self.assertTrue(points.admits(0, 25))
        self.assertTrue(points.admits(0, 24 + 2), "past the point nothing is dropped")

    def test_a_cooperative_rebalance_is_applied_incrementally_and_revocation_forgets(self):
        points = ResumePoints("tansu", TOPIC, cooperative=True)
        consumer = StandIn({3: 500})
        points.assign(consumer, assignment(3), timeout=1)
        self.assertEqual(consumer.incrementally, [(3, 0)])
        self.assertIsNone(consumer.assigned)
        points.forget({3})
        self.assertTrue(points.admits(3, 1))


class OnKafka(unittest.TestCase):
    def test_nothing_is_assigned_or_dropped(self):
        points = ResumePoints("kafka", TOPIC, cooperative=False)
        consumer = StandIn({0: 25})
        points.assign(consumer, assignment(0), timeout=1)
        self.assertIsNone(consumer.assigned)
        self.assertTrue(points.admits(0, 0))


if __name__ == "__main__":
    unittest.main()
