"""Hold, block strategies, kills and redeliveries, without Kafka."""

import unittest

from kadence_executor.dispatch import (
    Dispatch, RecentTriggers, RememberedKills, Refuse, Start, expired_reason, kill_message,
)


class Pending:
    def __init__(self, job, n, strategy="SERIAL_EXECUTION", at=0, emitted=0):
        self.trigger = {
            "trigger_id": f"{job}-{n}", "job_id": job, "block_strategy": strategy,
            "scheduled_at_ms": at, "emitted_at_ms": emitted,
        }


def ids(steps, kind):
    return [step.pending.trigger["trigger_id"] for step in steps if isinstance(step, kind)]


class BlockStrategies(unittest.TestCase):
    def test_serial_execution_queues_and_runs_in_order(self):
        dispatch = Dispatch("e1")
        [first] = dispatch.admit(Pending(5, 1), 0)
        self.assertEqual(first.pending.trigger["trigger_id"], "5-1")
        self.assertEqual(dispatch.admit(Pending(5, 2), 0), [])
        self.assertEqual(dispatch.admit(Pending(5, 3), 0), [])
        self.assertEqual(dispatch.activity(), ([5], [5]))
        [second] = dispatch.finished(5, first.stop)
        self.assertEqual(ids([second], Start), ["5-2"])
        [third] = dispatch.finished(5, second.stop)
        self.assertEqual(ids([third], Start), ["5-3"])
        self.assertEqual(dispatch.finished(5, third.stop), [])
        self.assertEqual(dispatch.activity(), ([], []))

    def test_discard_later_refuses_with_the_protocols_message(self):
        dispatch = Dispatch("e1")
        dispatch.admit(Pending(5, 1, "DISCARD_LATER"), 0)
        [refusal] = dispatch.admit(Pending(5, 2, "DISCARD_LATER"), 0)
        self.assertIsInstance(refusal, Refuse)
        self.assertEqual(
            refusal.message,
            "discarded: job 5 is already running or queued on executor e1 "
            "(block strategy DISCARD_LATER)",
        )

    def test_cover_early_stops_the_running_and_the_queued(self):
        dispatch = Dispatch("e1")
        [first] = dispatch.admit(Pending(5, 1, "COVER_EARLY"), 0)
        steps = dispatch.admit(Pending(5, 2, "COVER_EARLY"), 0)
        reason = "covered by trigger 5-2 (block strategy COVER_EARLY)"
        self.assertEqual(first.stop.reason, reason)
        self.assertTrue(first.stop.event.is_set())
        self.assertEqual(ids(steps, Start), ["5-2"])
        # The first reason wins: a covered run that is then killed says it was covered.
        first.stop.stop("killed: later")
        self.assertEqual(first.stop.reason, reason)

    def test_concurrent_runs_up_to_the_cap(self):
        dispatch = Dispatch("e1", concurrent_cap=2)
        steps = [dispatch.admit(Pending(5, n, "CONCURRENT"), 0) for n in (1, 2, 3)]
        self.assertEqual([ids(made, Start) for made in steps], [["5-1"], ["5-2"], []])
        self.assertEqual(ids(dispatch.finished(5, steps[0][0].stop), Start), ["5-3"])

    def test_a_run_and_its_redelivery_are_two_runs_of_the_lane(self):
        # A run handed back in a rebalance may still be returning when its trigger, delivered
        # again, starts: the end of the first must not end the second.
        dispatch = Dispatch("e1")
        [handed_back] = dispatch.admit(Pending(5, 1, "CONCURRENT"), 0)
        [again] = dispatch.admit(Pending(5, 1, "CONCURRENT"), 0)
        self.assertEqual(dispatch.finished(5, handed_back.stop), [])
        self.assertEqual(dispatch.activity(), ([5], []))
        dispatch.finished(5, again.stop)
        self.assertEqual(dispatch.activity(), ([], []))


class HoldAndKill(unittest.TestCase):
    def test_early_triggers_wait_for_their_millisecond(self):
        dispatch = Dispatch("e1")
        self.assertEqual(dispatch.admit(Pending(5, 1, at=1_000), 0), [])
        self.assertEqual(dispatch.next_release_ms(), 1_000)
        self.assertEqual(dispatch.activity(), ([], [5]))
        self.assertEqual(dispatch.release_due(999), [])
        self.assertEqual(ids(dispatch.release_due(1_000), Start), ["5-1"])

    def test_a_kill_stops_running_queued_and_held(self):
        dispatch = Dispatch("e1")
        [running] = dispatch.admit(Pending(5, 1), 0)
        dispatch.admit(Pending(5, 2), 0)
        dispatch.admit(Pending(5, 3, at=9_000), 0)
        dispatch.admit(Pending(6, 1, at=9_000), 0)
        refused = dispatch.kill(5, None, "killed: stuck")
        self.assertEqual(sorted(ids(refused, Refuse)), ["5-2", "5-3"])
        self.assertEqual(running.stop.reason, "killed: stuck")
        self.assertEqual(dispatch.held_count(), 1)
        self.assertEqual(ids(dispatch.kill(None, "6-1", "killed: one"), Refuse), ["6-1"])

    def test_remembered_kills_cover_what_was_emitted_before_them(self):
        kills = RememberedKills(memory_ms=3_600_000)
        command = {"job_id": 7, "trigger_id": None, "requested_at_ms": 1_000, "reason": None}
        reason = kill_message(command)
        self.assertEqual(reason, "killed: requested by an operator")
        kills.remember(command, reason, 1_000)
        early = {"trigger_id": "7-1", "job_id": 7, "emitted_at_ms": 900}
        late = {"trigger_id": "7-2", "job_id": 7, "emitted_at_ms": 1_100}
        self.assertEqual(kills.covering(early, 2_000), reason)
        self.assertIsNone(kills.covering(late, 2_000))
        self.assertIsNone(kills.covering(early, 1_000 + 3_600_001), "forgotten")

    def test_redeliveries_are_recognised_and_forgotten_ids_run_again(self):
        recent = RecentTriggers(capacity=2)
        self.assertTrue(recent.insert("1-1"))
        self.assertFalse(recent.insert("1-1"))
        recent.forget("1-1")
        self.assertTrue(recent.insert("1-1"))
        recent.insert("1-2")
        recent.insert("1-3")
        self.assertTrue(recent.insert("1-1"), "the oldest is forgotten past the capacity")


class ValidityWindow(unittest.TestCase):
    def test_a_trigger_is_taken_until_its_window_ends_and_refused_as_expired_after(self):
        windowed = {"trigger_id": "1-1000", "expires_at_ms": 5_000}
        self.assertIsNone(expired_reason(windowed, 5_000))
        self.assertEqual(
            expired_reason(windowed, 5_250),
            "expired trigger record: 1-1000 was valid until 5000 (ms since the epoch) and "
            "arrived 250 ms later; a copy, or a trigger that waited in its topic past its validity",
        )
        self.assertIsNone(expired_reason({"trigger_id": "1-1000", "expires_at_ms": None}, 10**15))


if __name__ == "__main__":
    unittest.main()
