"""The group protocol (classic or Kafka's KIP-848 consumer protocol) without a broker: the
trigger consumer's settings under each, what librdkafka makes of them, the options refused, and
the rebalance callbacks taking an incremental rebalance's lists as changes. The end-to-end
suites run both protocols against the real broker."""

import threading
import unittest

from confluent_kafka import Consumer, KafkaException, TopicPartition

from kadence_executor import Executor
from kadence_executor.consumer import Loop
from kadence_executor.dispatch import Stop
from kadence_executor.executor import CLASSIC_ONLY_OPTIONS, Settings

TOPIC = "kadence.triggers.billing"

# Both protocols' settings, but for the session, heartbeat and protocol.
SHARED = {
    "bootstrap.servers": "127.0.0.1:9",
    "group.id": "kadence.executor.billing",
    "client.id": "billing-1",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "earliest",
}


def settings(protocol, **options):
    options.setdefault("rebalance_timeout_s", 3.0)
    made = Settings(
        brokers="127.0.0.1:9", app="billing", executor_id="billing-1",
        session_timeout_ms=6000, group_protocol=protocol, allow_unverified=True,
        allow_unsigned=True, **options,
    )
    made.check()
    return made


class ConsumerSettings(unittest.TestCase):
    def test_the_classic_protocol_sets_the_session_timeout_and_heartbeat(self):
        self.assertEqual(
            settings("classic").group_consumer_config(),
            {
                **SHARED, "group.protocol": "classic",
                "session.timeout.ms": 6000, "heartbeat.interval.ms": 600,
                "partition.assignment.strategy": "range",
            },
        )

    def test_the_consumer_protocol_leaves_the_session_and_heartbeat_to_the_broker(self):
        config = settings("consumer").group_consumer_config()
        self.assertEqual(config, {**SHARED, "group.protocol": "consumer"})
        for refused in CLASSIC_ONLY_OPTIONS:
            self.assertNotIn(refused, config)

    def test_librdkafka_takes_the_settings_of_either_protocol(self):
        # librdkafka checks a consumer's settings when it is made, before it connects (nothing
        # listens on port 9); under the consumer protocol it refuses a session timeout.
        for protocol in ("classic", "consumer"):
            config = settings(protocol, kafka_options={"log_level": 0}).group_consumer_config()
            Consumer(config).close()
        leftover = settings("consumer").group_consumer_config()
        leftover["session.timeout.ms"] = 6000
        with self.assertRaisesRegex(KafkaException, "session.timeout.ms"):
            Consumer(leftover)

    def test_classic_and_default_raw_options_still_win(self):
        executor = Executor("b:9092", "billing", allow_unverified=True, allow_unsigned=True)
        self.assertEqual(executor.settings.group_protocol, "classic")
        config = settings("classic", kafka_options={"session.timeout.ms": 30000})
        self.assertEqual(config.group_consumer_config()["session.timeout.ms"], 30000)


class Refused(unittest.TestCase):
    def test_a_hand_back_wait_as_long_as_the_classic_session(self):
        with self.assertRaisesRegex(
            ValueError,
            r"rebalance_timeout_s \(3.001 s\) must be at most half of session_timeout_ms "
            r"\(6000 ms\)",
        ):
            settings("classic", rebalance_timeout_s=3.001)
        settings("classic", rebalance_timeout_s=3.0)
        # The broker keeps the session under the consumer protocol.
        settings("consumer", rebalance_timeout_s=6.0)

    def test_an_unknown_protocol(self):
        with self.assertRaisesRegex(ValueError, "unknown group_protocol 'Consumer': use"):
            Executor(
                "b:9092", "billing", allow_unverified=True, allow_unsigned=True,
                group_protocol="Consumer",
            )

    def test_a_raw_group_protocol(self):
        for protocol in ("classic", "consumer"):
            with self.assertRaisesRegex(
                ValueError, "kafka_options sets group.protocol: choose it with group_protocol="
            ):
                settings(protocol, kafka_options={"group.protocol": "consumer"})

    def test_classic_only_options_under_the_consumer_protocol(self):
        for key in CLASSIC_ONLY_OPTIONS:
            with self.assertRaisesRegex(
                ValueError, f'kafka_options sets {key}, which group_protocol="consumer" does not'
            ):
                settings("consumer", kafka_options={key: "1"})
            settings("classic", kafka_options={key: "1"})  # the classic protocol's to take


class FakeConsumer:
    """What the callbacks and the pause use of a consumer: an assignment they change through
    ``incremental_*`` as confluent-kafka does after an incremental rebalance's callback, paused
    partitions, and commits."""

    def __init__(self, assigned=()):
        self.assigned = set(assigned)
        self.paused = set()
        self.commits = []

    def assignment(self):
        return [TopicPartition(TOPIC, p) for p in sorted(self.assigned)]

    def incremental_assign(self, partitions):
        self.assigned |= {tp.partition for tp in partitions}

    def incremental_unassign(self, partitions):
        gone = {tp.partition for tp in partitions}
        self.assigned -= gone
        self.paused -= gone

    def pause(self, partitions):
        self.paused |= {tp.partition for tp in partitions}

    def resume(self, partitions):
        self.paused -= {tp.partition for tp in partitions}

    def commit(self, offsets, asynchronous):
        self.commits.append([(tp.partition, tp.offset) for tp in offsets])


class IncrementalRebalance(unittest.TestCase):
    """One partition moves away and another arrives, as the consumer protocol does it; the
    rest keep running, committing and paused."""

    def setUp(self):
        config = settings("consumer", kafka_options={"log_level": 0}, rebalance_timeout_s=0.05)
        self.loop = Loop(config, {}, threading.Event())
        self.addCleanup(self.loop.consumer.close)
        self.loop.publisher.close(timeout_s=0)
        self.fake = FakeConsumer()
        self.loop.consumer = self.fake
        self.seen = []
        self.loop.partition_listeners.append(self.seen.append)
        self.rebalance(assigned=[0, 1, 2])
        for partition in (0, 1, 2):
            self.loop.tracker.track(partition, 10)
            self.loop.tracker.complete(partition, 10)
        self.loop._commit()
        self.assertEqual(self.fake.commits.pop(), [(0, 11), (1, 11), (2, 11)])
        for partition in (0, 1):
            self.loop.tracker.track(partition, 11)
        self.stops = {p: Stop() for p in (0, 1)}
        self.entries = {p: [stop, False, f"7-{p}"] for p, stop in self.stops.items()}
        self.loop.running = {(p, 11): entry for p, entry in self.entries.items()}
        for entry in self.entries.values():
            self.loop.recent.insert(entry[2])

    def rebalance(self, assigned=(), revoked=()):
        """One callback as librdkafka calls it, then confluent-kafka's own incremental change."""
        if revoked:
            parts = [TopicPartition(TOPIC, p) for p in revoked]
            with self.assertLogs("kadence_executor", level="INFO"):
                self.loop._on_revoke(self.fake, parts)
            self.fake.incremental_unassign(parts)
        if assigned:
            parts = [TopicPartition(TOPIC, p) for p in assigned]
            with self.assertLogs("kadence_executor", level="INFO"):
                self.loop._on_assign(self.fake, parts)
            self.fake.incremental_assign(parts)

    def test_only_the_partitions_named_move(self):
        self.loop._pause(True)  # full: nothing is fetched
        self.assertEqual(self.fake.paused, {0, 1, 2})
        self.rebalance(revoked=[1])
        self.assertEqual(self.loop.owned, {0, 2})
        self.assertTrue(self.entries[1][1], "the run on 1 is handed back")
        self.assertNotIn((1, 11), self.loop.running)
        self.assertTrue(self.loop.recent.insert("7-1"), "and its trigger forgotten at once")
        self.assertFalse(self.entries[0][1], "the run on 0 goes on")
        self.assertFalse(self.loop.recent.insert("7-0"))
        self.assertIsNone(self.stops[0].reason)
        self.assertEqual(self.fake.commits, [], "1's offset 11 was committed already")
        self.rebalance(assigned=[3])
        self.assertEqual(self.loop.owned, {0, 2, 3})
        self.assertEqual(self.seen, [[0, 1, 2], [0, 2], [0, 2, 3]])
        # The run on 0 ends: its partition commits, and fetching resumes on every partition,
        # the ones paused before the rebalance too.
        self.loop.tracker.complete(0, 11)
        self.loop._commit()
        self.assertEqual(self.fake.commits, [[(0, 12)]])
        self.loop._pause(False)
        self.assertEqual(self.fake.paused, set())

    def test_a_partition_arriving_while_full_is_paused_with_the_others(self):
        self.loop._pause(True)
        self.rebalance(assigned=[3])
        self.loop._pause(True)
        self.assertEqual(self.fake.paused, {0, 1, 2, 3})

    def test_a_revoked_partitions_answered_offsets_are_committed_before_it_goes(self):
        self.loop.tracker.complete(1, 11)
        self.loop.tracker.track(1, 12)
        self.loop.tracker.complete(1, 12)
        self.loop.running.pop((1, 11))
        self.rebalance(revoked=[1])
        self.assertEqual(self.fake.commits, [[(1, 13)]])
        self.assertEqual(self.loop.tracker.take_committable(), [], "0 and 2 have not moved")


if __name__ == "__main__":
    unittest.main()
