"""A trigger's way from admission to its start (PROTOCOL.md sections 4 and 5), as pure
bookkeeping: no Kafka, no threads, time passed in.

- ``Dispatch`` holds early triggers until their ``scheduled_at_ms``, then applies the job's
  block strategy: SERIAL_EXECUTION queues, DISCARD_LATER refuses, COVER_EARLY stops what runs
  and is queued, CONCURRENT runs in parallel up to a cap. A KILL stops running runs and drops
  queued and held triggers. Every event answers with steps: ``Start`` (run it) or ``Refuse``
  (answer it with a failure message, without running it).
- ``RememberedKills`` keeps KILLs for the triggers they cover that arrive later.
- ``RecentTriggers`` recognises redelivered triggers by id.

A pending item is anything with a ``.trigger`` dict (the decoded TriggerRecord).
"""

import heapq
import itertools
import threading
from collections import OrderedDict, deque
from dataclasses import dataclass, field


@dataclass(eq=False)  # compared and hashed by identity: a lane keys its runs by their Stop
class Stop:
    """How a running run is stopped from outside: the first reason given wins. ``event`` is
    what the handler sees as cancelled; ``wake`` also fires when the handler ends, so the
    run's thread waits on one event for either."""

    event: threading.Event = field(default_factory=threading.Event)
    wake: threading.Event = field(default_factory=threading.Event)
    reason: str = None

    def stop(self, reason):
        if self.reason is None:
            self.reason = reason
        self.event.set()
        self.wake.set()


@dataclass
class Start:
    pending: object
    stop: Stop


@dataclass
class Refuse:
    pending: object
    message: str


class _Lane:
    def __init__(self):
        # Stop -> trigger id: keyed by the run, not its trigger id, because a run handed back
        # in a rebalance may still be returning when its redelivery starts (PROTOCOL.md
        # section 7).
        self.running = {}
        self.queued = deque()  # (strategy, trigger id, pending)


class Dispatch:
    """The hold and the block-strategy lanes of one executor."""

    def __init__(self, executor_id, concurrent_cap=16):
        self.executor_id = executor_id
        self.concurrent_cap = max(1, concurrent_cap)
        self._held = []  # heap of (scheduled_at_ms, arrival, pending)
        self._arrivals = itertools.count()
        self._lanes = {}

    def admit(self, pending, now_ms):
        """A trigger that passed admission: held until its millisecond, or placed now."""
        at_ms = pending.trigger["scheduled_at_ms"]
        if at_ms > now_ms:
            heapq.heappush(self._held, (at_ms, next(self._arrivals), pending))
            return []
        return self._place(pending)

    def next_release_ms(self):
        return self._held[0][0] if self._held else None

    def release_due(self, now_ms):
        steps = []
        while self._held and self._held[0][0] <= now_ms:
            steps.extend(self._place(heapq.heappop(self._held)[2]))
        return steps

    def finished(self, job_id, stop):
        """The run of `job_id` that `stop` stops ended: its lane may start queued triggers."""
        lane = self._lanes.get(job_id)
        if lane is None:
            return []
        lane.running.pop(stop, None)
        steps = []
        while lane.queued:
            strategy = lane.queued[0][0]
            if strategy == "CONCURRENT":
                may_start = len(lane.running) < self.concurrent_cap
            else:
                may_start = not lane.running
            if not may_start:
                break
            steps.append(self._start(lane, lane.queued.popleft()[2]))
        if not lane.running and not lane.queued:
            del self._lanes[job_id]
        return steps

    def kill(self, job_id, trigger_id, reason):
        """Stops `job_id`'s runs and triggers, or the one `trigger_id`: running runs get
        `reason`, queued and held triggers are refused with it."""
        refused = []
        for lane_job, lane in list(self._lanes.items()):
            for stop, running_id in lane.running.items():
                if lane_job == job_id or running_id == trigger_id:
                    stop.stop(reason)
            kept = deque()
            for item in lane.queued:
                if lane_job == job_id or item[1] == trigger_id:
                    refused.append(item[2])
                else:
                    kept.append(item)
            lane.queued = kept
        held = []
        for entry in self._held:
            trigger = entry[2].trigger
            if trigger["job_id"] == job_id or trigger["trigger_id"] == trigger_id:
                refused.append(entry[2])
            else:
                held.append(entry)
        heapq.heapify(held)
        self._held = held
        return [Refuse(pending, reason) for pending in refused]

    def activity(self):
        """(running job ids, queued job ids), ascending; held triggers count as queued."""
        running = sorted(job for job, lane in self._lanes.items() if lane.running)
        queued = {job for job, lane in self._lanes.items() if lane.queued}
        queued.update(entry[2].trigger["job_id"] for entry in self._held)
        return running, sorted(queued)

    def held_count(self):
        return len(self._held)

    def _place(self, pending):
        trigger = pending.trigger
        job_id, strategy = trigger["job_id"], trigger["block_strategy"]
        lane = self._lanes.setdefault(job_id, _Lane())
        busy = bool(lane.running or lane.queued)
        if strategy == "SERIAL_EXECUTION" and busy:
            lane.queued.append((strategy, trigger["trigger_id"], pending))
            return []
        if strategy == "DISCARD_LATER" and busy:
            return [
                Refuse(
                    pending,
                    f"discarded: job {job_id} is already running or queued on executor "
                    f"{self.executor_id} (block strategy DISCARD_LATER)",
                )
            ]
        if strategy == "COVER_EARLY" and busy:
            reason = f"covered by trigger {trigger['trigger_id']} (block strategy COVER_EARLY)"
            for stop in lane.running:
                stop.stop(reason)
            covered = [Refuse(item[2], reason) for item in lane.queued]
            lane.queued.clear()
            return covered + [self._start(lane, pending)]
        if strategy == "CONCURRENT" and (
            len(lane.running) >= self.concurrent_cap or lane.queued
        ):
            lane.queued.append((strategy, trigger["trigger_id"], pending))
            return []
        return [self._start(lane, pending)]

    @staticmethod
    def _start(lane, pending):
        stop = Stop()
        lane.running[stop] = pending.trigger["trigger_id"]
        return Start(pending, stop)


class RememberedKills:
    """KILLs remembered for `memory_ms`: a KILL of a run covers that run whenever it arrives;
    a KILL of a job covers the job's triggers emitted at or before the KILL was requested."""

    def __init__(self, memory_ms):
        self.memory_ms = memory_ms
        self._kills = []  # (job id, trigger id, requested at, reason)

    def remember(self, command, reason, now_ms):
        self._forget(now_ms)
        if command["requested_at_ms"] >= now_ms - self.memory_ms:
            self._kills.append(
                (command["job_id"], command["trigger_id"], command["requested_at_ms"], reason)
            )

    def covering(self, trigger, now_ms):
        """The message of the KILL that covers `trigger`, or None."""
        self._forget(now_ms)
        for job_id, trigger_id, requested_at_ms, reason in self._kills:
            if trigger_id is not None:
                if trigger_id == trigger["trigger_id"]:
                    return reason
            elif job_id == trigger["job_id"] and trigger["emitted_at_ms"] <= requested_at_ms:
                return reason
        return None

    def _forget(self, now_ms):
        oldest = now_ms - self.memory_ms
        self._kills = [kill for kill in self._kills if kill[2] >= oldest]


class RecentTriggers:
    """The ids of the triggers recently taken here, oldest forgotten first."""

    def __init__(self, capacity=10_000):
        self.capacity = capacity
        self._ids = OrderedDict()

    def insert(self, trigger_id):
        """Remembers `trigger_id`; False if it was known already (a redelivery)."""
        if trigger_id in self._ids:
            return False
        self._ids[trigger_id] = None
        if len(self._ids) > self.capacity:
            self._ids.popitem(last=False)
        return True

    def forget(self, trigger_id):
        self._ids.pop(trigger_id, None)


def expired_reason(trigger, now_ms):
    """The dead letter's reason when `trigger` arrived past its validity window (its
    ``expires_at_ms``, PROTOCOL.md section 4), worded as the Rust SDK's; None while it is
    valid or when it has no window (records written before TriggerRecord v3)."""
    expires_at_ms = trigger.get("expires_at_ms")
    if expires_at_ms is None or now_ms <= expires_at_ms:
        return None
    return (
        f"expired trigger record: {trigger['trigger_id']} was valid until {expires_at_ms} "
        f"(ms since the epoch) and arrived {now_ms - expires_at_ms} ms later; a copy, or a "
        "trigger that waited in its topic past its validity"
    )


def kill_message(command):
    """The result message of a run a KILL stops."""
    return f"killed: {command.get('reason') or 'requested by an operator'}"
