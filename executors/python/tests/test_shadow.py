"""Shadow executors (PROTOCOL.md section 10), as far as they go without Kafka: their group,
reset and results topic, the handler's ``ctx.shadow``, log lines kept local, and records that
cannot be taken skipped instead of dead-lettered. The conformance suite runs one beside a
production executor on the real broker."""

import threading
import unittest

from kadence_executor import Executor, JobFailed
from kadence_executor.consumer import Loop
from kadence_executor.dispatch import Stop
from kadence_executor.executor import Settings
from kadence_executor.runs import JobLogger, log_locally, run_handler

from .test_codec import trigger


class Names(unittest.TestCase):
    def test_a_shadow_has_its_own_group_start_and_results_topic(self):
        production = Settings(brokers="b:9092", app="billing", topic_prefix="acme")
        shadow = Settings(brokers="b:9092", app="billing", topic_prefix="acme", shadow=True)
        self.assertEqual(
            (production.group(), production.offset_reset(), production.results_topic()),
            ("acme.executor.billing", "earliest", "acme.results"),
        )
        self.assertEqual(
            (shadow.group(), shadow.offset_reset(), shadow.results_topic()),
            ("acme.shadow.billing", "latest", "acme.shadow-results"),
        )

    def test_the_executor_takes_the_flag(self):
        unprotected = {"allow_unverified": True, "allow_unsigned": True}
        self.assertTrue(Executor("b:9092", "billing", shadow=True, **unprotected).settings.shadow)
        self.assertFalse(Executor("b:9092", "billing", **unprotected).settings.shadow)


def describe(ctx):
    ctx.log("describing")
    raise JobFailed(f"{'shadow' if ctx.shadow else 'production'} run of a {ctx.trigger_type} trigger")


class Runs(unittest.TestCase):
    def run_once(self, shadow):
        return run_handler(describe, trigger(), Stop(), JobLogger(10), lambda final: None, shadow)

    def test_the_handler_can_tell_a_shadow_run(self):
        self.assertEqual(self.run_once(False), (500, "production run of a CRON trigger", None))
        self.assertEqual(self.run_once(True), (500, "shadow run of a CRON trigger", None))

    def test_a_success_carries_the_note_its_handler_returns_and_no_message_else(self):
        def run(handler):
            return run_handler(handler, trigger(), Stop(), JobLogger(10), lambda final: None)

        self.assertEqual(run(lambda ctx: "3 reports sent"), (200, "3 reports sent", None))
        self.assertEqual(run(lambda ctx: None), (200, None, None))
        self.assertEqual(run(lambda ctx: ""), (200, None, None))
        self.assertEqual(run(lambda ctx: 42), (200, None, None), "only a string is a note")

    def test_a_shadow_runs_lines_go_to_the_process_log(self):
        with self.assertLogs("kadence_executor", level="DEBUG") as seen:
            log_locally(trigger(), 3, ["one", "two"])
        self.assertEqual(
            [record.getMessage() for record in seen.records],
            ["shadow run 7-1000 log line 3: one", "shadow run 7-1000 log line 4: two"],
        )


class FakeMessage:
    def partition(self):
        return 0

    def offset(self):
        return 41


class FakePublisher:
    def __init__(self):
        self.dead_letters = []

    def dead_letter(self, message, reason, give_up):
        self.dead_letters.append(reason)
        return True


class Unreadable(unittest.TestCase):
    """A record a shadow cannot take is counted and completed at once; production's group
    dead-letters it (a second letter would double it)."""

    def loop(self, shadow):
        # No broker: the clients are made, and told not to log their failing connections.
        settings = Settings(
            brokers="127.0.0.1:9", app="billing", shadow=shadow, kafka_options={"log_level": 0}
        )
        settings.executor_id = "billing-test"
        loop = Loop(settings, {}, threading.Event())
        self.addCleanup(loop.consumer.close)
        loop.publisher.close(timeout_s=0)
        loop.publisher = FakePublisher()
        loop.tracker.track(0, 41)
        return loop

    def test_a_shadow_skips_what_production_dead_letters(self):
        shadow = self.loop(shadow=True)
        with self.assertLogs("kadence_executor", level="WARNING") as seen:
            shadow._dead_letter(FakeMessage(), "undecodable trigger record: garbage")
        self.assertEqual(shadow.publisher.dead_letters, [])
        self.assertEqual(shadow.shadow_skipped, 1)
        self.assertIn("shadow executor skipping trigger record at 0/41", seen.output[0])
        self.assertEqual(shadow.tracker.take_committable(), [(0, 42)], "committed past")

    def test_production_dead_letters_it(self):
        production = self.loop(shadow=False)
        with self.assertLogs("kadence_executor", level="WARNING"):
            production._dead_letter(FakeMessage(), "undecodable trigger record: garbage")
        event = production.events.get(timeout=5)  # the letter's thread reports back
        self.assertEqual(event[0].offset, 41)
        self.assertEqual(production.publisher.dead_letters, ["undecodable trigger record: garbage"])
        self.assertEqual(production.tracker.take_committable(), [(0, 42)])


if __name__ == "__main__":
    unittest.main()
