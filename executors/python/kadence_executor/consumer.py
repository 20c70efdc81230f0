"""The consumer loop (PROTOCOL.md sections 1, 4, 7 and 9): consuming, then draining, then done.

One thread (the caller of ``Loop.run``) owns the consumer and the bookkeeping (``dispatch``):
it polls trigger records once the control reader has caught up, admits each (verify, decode,
refuse it past its validity window, recognise redeliveries and remembered KILLs, find the
handler), holds it or applies its block
strategy, releases held triggers at their millisecond, commits every second and beats every
few seconds. Runs, refusals and dead letters each go in a thread of their own, publish their
answer and report back through ``_report``; the loop never waits for a handler.

Offsets are committed only up to the lowest trigger not yet answered (``offsets``). When the
group revokes partitions, the callback lets their running runs finish within the rebalance
timeout and commits them; the rest are handed back without a result (their trigger ids
forgotten at once, so that a redelivery runs), and triggers of revoked partitions that were
only queued or held never start here. Partitions *lost* (the session expired, and the group
gave them to others) are handed back at once and nothing is committed for them.

Assignments and revocations are handled as changes: ``on_assign`` adds the partitions it is
given and ``on_revoke`` takes away, hands back and commits only those it is given. That is what
both group protocols need (``Settings.group_protocol``). Under the classic one with the
``range`` assignor (named, so that the executors of other SDKs in the group share it) a
rebalance is eager: every partition is revoked, then the new assignment given whole.
Under the consumer protocol (KIP-848), and the classic one with ``cooperative-sticky``,
librdkafka reports the rebalance as ``COOPERATIVE``: the callbacks get only the partitions that
move, and since they call neither ``assign`` nor ``incremental_assign`` (but on tansu, see
``resume``), confluent-kafka applies the lists itself when they return, with ``incremental_assign`` / ``incremental_unassign``, so
the partitions that stay are never interrupted. The loop's pause (no fetching while
``max_in_flight`` triggers are in flight) is kept per partition by the client: partitions that
stay through an incremental rebalance keep theirs, and those that arrive need not have it, so
after every rebalance the loop sets it afresh on the whole assignment.

A shadow executor (``Settings.shadow``, PROTOCOL.md section 10) takes the same way in the group
``{prefix}.shadow.{app}``, with these differences: a group new to a partition starts at its end,
committed when the partition is assigned (so the trigger emitted right after the assignment is
announced is not missed, as it could be while the client looks the end up on its first fetch);
results go to ``{prefix}.shadow-results``; no beats; a run's log lines go to this process's
logging (debug) instead of ``{prefix}.logs``; a record that cannot be taken is logged, counted
and committed past instead of dead-lettered (production's group dead-letters it).
"""

import logging
import queue
import socket
import threading
import time

from confluent_kafka import OFFSET_INVALID, Consumer, KafkaException, TopicPartition

from . import codec
from .control import ControlReader
from .dispatch import (
    Dispatch, RecentTriggers, RememberedKills, Refuse, Start, expired_reason, kill_message,
)
from .offsets import OffsetTracker
from .publishing import Publisher
from .resume import ResumePoints
from .runs import (
    SHUTDOWN_MESSAGE, JobLogger, log_locally, log_records, now_ms, result_record, run_handler,
)
from .signing import ROUND_SIGNATURES_FEATURE, VerifyError
from .traceparent import answer_header

log = logging.getLogger("kadence_executor")
VERSION = "python-0.1.0"


class Pending:
    """A received trigger on its way: the record, where it came from, and the headers its
    answer carries (the trace context, see ``traceparent``)."""

    def __init__(self, trigger, partition, offset, answer_headers=()):
        self.trigger, self.partition, self.offset = trigger, partition, offset
        self.answer_headers = list(answer_headers)
        # The run's Stop once its lane started it: it names the run to the lane when it ends.
        self.stop = None


class Loop:
    def __init__(self, settings, handlers, stopping, partition_listeners=()):
        self.s = settings
        self.handlers = handlers
        self.stopping = stopping
        self.partition_listeners = list(partition_listeners)
        self.shadow_skipped = 0
        self.topic = f"{settings.topic_prefix}.triggers.{settings.app}"
        self.lock = threading.RLock()
        self.events = queue.SimpleQueue()
        self.dispatch = Dispatch(settings.executor_id, settings.max_concurrent_per_job)
        self.recent = RecentTriggers()
        self.kills = RememberedKills(settings.kill_memory_ms)
        self.tracker = OffsetTracker()
        self.resume = ResumePoints(settings.broker_kind, self.topic, settings.cooperative())
        self.owned = set()
        self.running = {}  # (partition, offset) -> [stop, handed back, trigger id]
        self.in_flight = 0
        self.hard_stop = threading.Event()
        self.caught_up = threading.Event()
        self.beat_now = True
        # Whether the loop paused the assignment; None after a rebalance: set afresh.
        self.paused = False
        self.publisher = Publisher(
            settings.client_config(), settings.topic_prefix, settings.results_topic(),
            settings.executor_key,
        )
        self.consumer = Consumer(settings.group_consumer_config())

    # The loop.

    def run(self):
        self._announce_start()
        control = ControlReader(self.s, self._on_command, self.caught_up.set)
        control.start()
        self.consumer.subscribe(
            [self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )
        next_commit = next_beat = time.monotonic()
        drain_deadline = None
        try:
            while True:
                self._handle_events()
                self._carry_out(self.dispatch.release_due(now_ms()))
                if drain_deadline is None and self.stopping.is_set():
                    drain_deadline = time.monotonic() + self.s.drain_timeout_s
                    log.info("draining %d triggers in flight", self.in_flight)
                    self.beat_now = True
                draining = drain_deadline is not None
                if draining and self.in_flight == 0:
                    break
                if draining and time.monotonic() >= drain_deadline:
                    self._give_up()
                    break
                self._poll(draining)
                if time.monotonic() >= next_commit:
                    self._commit()
                    next_commit = time.monotonic() + self.s.commit_interval_s
                if self.beat_now or time.monotonic() >= next_beat:
                    self._beat("STOPPING" if draining else "RUNNING")
                    next_beat = time.monotonic() + self.s.beat_interval_s
        finally:
            self._finish(control)

    def _announce_start(self):
        """Logs an error for each protection the operator opted out of."""
        if not self.s.trusted_keys:
            log.error(
                "RUNNING UNVERIFIED (allow_unverified=True): no trusted scheduler key, so "
                "triggers and control records are not verified, and whoever can write these "
                "topics runs and kills handlers here"
            )
        if self.s.executor_key is None:
            log.error(
                "RUNNING UNSIGNED (allow_unsigned=True): no executor key, so results, logs and "
                "beats go unsigned, and a scheduler that requires executor signatures (the "
                "default) refuses them"
            )

    def _poll(self, draining):
        """Receives one record when one may be taken; otherwise only serves the group."""
        may_take = self.caught_up.is_set() and not draining
        full = self.in_flight >= self.s.max_in_flight
        self._pause(not may_take or full)
        if not self.caught_up.is_set():
            time.sleep(0.02)
            return
        release = self.dispatch.next_release_ms()
        wait = 0.02 if release is None else max(0.0, min(0.02, (release - now_ms()) / 1000))
        message = self.consumer.poll(wait)
        if message is None or draining:
            # One fetched before the pause took effect stays uncommitted: redelivered later.
            return
        if message.error():
            log.warning("error while receiving triggers: %s", message.error())
            return
        if not self.resume.admits(message.partition(), message.offset()):
            return  # read again before the committed offset (tansu, see resume)
        self._admit(message)

    def _pause(self, pause):
        if pause == self.paused:
            return
        assignment = self.consumer.assignment()
        if pause:
            self.consumer.pause(assignment)
        else:
            self.consumer.resume(assignment)
        self.paused = pause

    def _give_up(self):
        log.warning("drain deadline passed; cancelling the remaining runs (redelivered later)")
        self.hard_stop.set()
        with self.lock:
            for entry in self.running.values():
                # As a hand-back: no result and no commit, so the partition's next owner runs
                # it (PROTOCOL.md section 7).
                entry[1] = True
                entry[0].stop(SHUTDOWN_MESSAGE)

    def _finish(self, control):
        self._commit()
        self.consumer.close()
        control.stopped.set()
        control.join(timeout=5)
        self.owned = set()
        if not self.s.shadow:
            self.publisher.beat(self._beat_record("STOPPING", [], []))
        self.publisher.close()
        log.info("executor %s stopped", self.s.executor_id)

    # Admission.

    def _admit(self, message):
        partition, offset = message.partition(), message.offset()
        with self.lock:
            self.tracker.track(partition, offset)
            self.in_flight += 1
        if self.s.trusted_keys:
            try:
                self.s.trusted_keys.verify(
                    self.topic, message.partition(), message.value(), message.headers()
                )
            except VerifyError as error:
                return self._dead_letter(message, f"refused trigger record: {error}")
        if message.value() is None:
            return self._dead_letter(message, "trigger record has no value")
        try:
            trigger = codec.decode("TriggerRecord", message.value())
        except codec.CodecError as error:
            return self._dead_letter(message, f"undecodable trigger record: {error}")
        received_at_ms = now_ms()
        expired = expired_reason(trigger, received_at_ms)
        if expired is not None:
            return self._dead_letter(message, expired)
        pending = Pending(trigger, partition, offset, answer_header(message.headers()))
        if not self.recent.insert(trigger["trigger_id"]):
            log.info("trigger %s redelivered; it ran here already", trigger["trigger_id"])
            return self._report(pending, handled=True)
        killed = self.kills.covering(trigger, received_at_ms)
        if killed is not None:
            return self._spawn(self._refuse, pending, killed)
        refusal = self._no_handler(trigger)
        if refusal is not None:
            return self._spawn(self._refuse, pending, refusal)
        self._carry_out(self.dispatch.admit(pending, now_ms()))

    def _no_handler(self, trigger):
        executor = self.s.executor_id
        if trigger["glue_type"] != "BEAN":
            return (
                f"executor {executor} does not run scripts ({trigger['glue_type']}): "
                "script handlers are switched off"
            )
        if trigger["handler"] not in self.handlers:
            names = ", ".join(sorted(self.handlers))
            return f'executor {executor} has no handler named "{trigger["handler"]}" (it has: {names})'
        return None

    def _carry_out(self, steps):
        for step in steps:
            if isinstance(step, Start):
                self._spawn(self._run, step.pending, step.stop)
            elif isinstance(step, Refuse):
                self._spawn(self._refuse, step.pending, step.message)

    @staticmethod
    def _spawn(target, *args):
        threading.Thread(target=target, args=args, daemon=True).start()

    # Answers, each in a thread of its own.

    def _run(self, pending, stop):
        key = (pending.partition, pending.offset)
        pending.stop = stop
        with self.lock:
            if pending.partition not in self.owned:
                # Queued or held while the group moved its partition: the new owner runs it.
                return self._report(pending, handled=False, ran=True, forget=True)
            # [stop, handed back, trigger id]; the revocation marks it and takes it out.
            entry = [stop, False, pending.trigger["trigger_id"]]
            self.running[key] = entry
        trigger = pending.trigger
        started = now_ms()
        logger = JobLogger(self.s.max_log_lines)

        def ship(final):
            first, lines = logger.take(final)
            if self.s.shadow:
                # Keyed by trigger id, they would mix into the production run's log.
                return log_locally(trigger, first, lines)
            records = log_records(trigger, self.s.executor_id, started, first, lines)
            self.publisher.publish_logs(records, self.hard_stop)

        handler = self.handlers[trigger["handler"]]
        code, message, retry = run_handler(handler, trigger, stop, logger, ship, self.s.shadow)
        with self.lock:
            handed_back = entry[1]
        if handed_back:
            # Handed back, or cancelled when the drain gave up: no result, no commit. A handed
            # back one was forgotten by the revocation (``_on_revoke``): forgetting it now could
            # forget its redelivery, admitted meanwhile.
            return self._report(pending, handled=False, ran=True)
        ship(True)
        result = result_record(trigger, self.s.executor_id, code, message, started, now_ms(), retry)
        handled = self.publisher.publish_result(result, self.hard_stop, pending.answer_headers)
        # A result that cannot be published leaves the offset uncommitted and the trigger id
        # forgotten: the trigger is redelivered, to this executor too (PROTOCOL.md section 7).
        self._report(pending, handled=handled, ran=True, forget=not handled)
        with self.lock:
            if self.running.get(key) is entry:
                del self.running[key]

    def _refuse(self, pending, message):
        at = now_ms()
        result = result_record(pending.trigger, self.s.executor_id, 500, message, at, at)
        published = self.publisher.publish_result(result, self.hard_stop, pending.answer_headers)
        self._report(pending, handled=published, forget=not published)

    def _dead_letter(self, message, reason):
        if self.s.shadow:
            # Production's group dead-letters the same record; a second letter would double it.
            self.shadow_skipped += 1
            log.warning("shadow executor skipping trigger record at %s/%s (%d so far): %s",
                        message.partition(), message.offset(), self.shadow_skipped, reason)
            pending = Pending(None, message.partition(), message.offset())
            return self._report(pending, handled=True)
        log.warning("sending trigger record at %s/%s to the DLQ: %s",
                    message.partition(), message.offset(), reason)

        def send():
            handled = self.publisher.dead_letter(message, reason, self.hard_stop)
            self._report(Pending(None, message.partition(), message.offset()), handled=handled)

        self._spawn(send)

    def _report(self, pending, handled, ran=False, forget=False):
        """A record is done with: complete its offset at once if it was answered (the
        revocation callback commits from the tracker), then tell the loop."""
        if handled:
            with self.lock:
                self.tracker.complete(pending.partition, pending.offset)
        self.events.put((pending, ran, forget))

    def _handle_events(self):
        while True:
            try:
                event = self.events.get_nowait()
            except queue.Empty:
                return
            if event[0] == "command":
                self._apply_kill(event[1])
                continue
            pending, ran, forget = event
            self.in_flight -= 1
            if forget:
                self.recent.forget(pending.trigger["trigger_id"])
            if ran:
                self._carry_out(self.dispatch.finished(pending.trigger["job_id"], pending.stop))

    # Control, group, commits, beats.

    def _on_command(self, command):
        self.events.put(("command", command))

    def _apply_kill(self, command):
        if command["command"] != "KILL":
            return
        reason = kill_message(command)
        self.kills.remember(command, reason, now_ms())
        self._carry_out(self.dispatch.kill(command["job_id"], command["trigger_id"], reason))

    def _on_assign(self, consumer, partitions):
        ids = [p.partition for p in partitions if p.topic == self.topic]
        if self.s.shadow:
            self._commit_ends(consumer, ids)
        self.resume.assign(consumer, partitions, self.s.rebalance_timeout_s)
        log.info("partitions assigned: %s", ids)
        with self.lock:
            self.owned.update(ids)
        # Which of the assigned partitions are paused is not known now (module docs).
        self.paused = None
        self.beat_now = True
        self._tell_partitions()

    def _commit_ends(self, consumer, ids):
        """A shadow group starts at the live end: commits the end of each assigned partition
        the group has no offset for, before the assignment is announced. On a failure the
        client's own reset to the end still applies, only later."""
        if not ids:
            return
        timeout = self.s.rebalance_timeout_s
        try:
            committed = consumer.committed([TopicPartition(self.topic, p) for p in ids], timeout)
            ends = []
            for tp in committed:
                if tp.offset == OFFSET_INVALID:
                    _low, high = consumer.get_watermark_offsets(tp, timeout=timeout)
                    ends.append(TopicPartition(self.topic, tp.partition, high))
            if ends:
                consumer.commit(offsets=ends, asynchronous=False)
                log.info("shadow group starts at the end of %s", [(t.partition, t.offset) for t in ends])
        except KafkaException as error:
            log.warning("cannot fix the shadow group's start (it starts where the client finds "
                        "the end): %s", error)

    def _tell_partitions(self):
        with self.lock:
            owned = sorted(self.owned)
        for listener in self.partition_listeners:
            listener(owned)

    def _on_lost(self, consumer, partitions):
        """Lost, not revoked: this member's session expired and the group gave the partitions
        to others, which may be running the same triggers already. Their runs are handed back
        at once and nothing is committed for them (the group has moved on)."""
        self._on_revoke(consumer, partitions, lost=True)

    def _on_revoke(self, consumer, partitions, lost=False):
        ids = {p.partition for p in partitions if p.topic == self.topic}
        deadline = time.monotonic() + (0 if lost else self.s.rebalance_timeout_s)
        while time.monotonic() < deadline and self._running_on(ids):
            time.sleep(0.01)
        with self.lock:
            for key in [key for key in self.running if key[0] in ids]:
                entry = self.running.pop(key)
                entry[1] = True  # handed back: no result, no commit
                entry[0].stop("handed back to the partition's new owner")
                # Forgotten now, not when the cancelled handler returns: the partition may come
                # straight back, and its redelivered trigger, taken for a redelivery of a run
                # still going, would be committed past and never run.
                self.recent.forget(entry[2])
            released = self.tracker.release(ids)
            self.owned -= ids
        self.resume.forget(ids)
        if released and not lost:
            try:
                consumer.commit(offsets=self._offsets(released), asynchronous=False)
            except KafkaException as error:
                log.warning("cannot commit offsets of revoked partitions: %s", error)
        log.info("partitions %s: %s", "lost" if lost else "revoked", sorted(ids))
        self.paused = None
        self.beat_now = True
        self._tell_partitions()

    def _running_on(self, partitions):
        with self.lock:
            return any(key[0] in partitions for key in self.running)

    def _commit(self):
        with self.lock:
            ready = self.tracker.take_committable()
        if ready:
            try:
                self.consumer.commit(offsets=self._offsets(ready), asynchronous=False)
            except KafkaException as error:
                log.warning("cannot commit offsets; they go with the next ones: %s", error)

    def _offsets(self, ready):
        return [TopicPartition(self.topic, partition, offset) for partition, offset in ready]

    def _beat(self, state):
        self.beat_now = False
        if self.s.shadow:
            return  # not production: routing and the lost-run monitor must not count it
        running, queued = self.dispatch.activity()
        with self.lock:
            owned = sorted(self.owned)
        self.publisher.beat(self._beat_record(state, owned, running, queued))

    def _beat_record(self, state, owned, running, queued=()):
        return {
            "executor_id": self.s.executor_id,
            "app": self.s.app,
            "host": socket.gethostname(),
            "version": VERSION,
            "handlers": sorted(self.handlers),
            "owned_partitions": owned,
            "running_jobs": list(running),
            "queued_jobs": list(queued),
            "state": state,
            "sent_at_ms": now_ms(),
            # Ascending; admission verifies triggers in either signature form (``signing``).
            "features": [ROUND_SIGNATURES_FEATURE],
        }
