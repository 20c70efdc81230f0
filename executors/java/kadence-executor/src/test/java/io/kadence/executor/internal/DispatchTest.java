package io.kadence.executor.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kadence.executor.wire.Records.BlockStrategy;
import io.kadence.executor.wire.Records.ControlCommand;
import io.kadence.executor.wire.Records.ControlRecord;
import io.kadence.executor.wire.Records.GlueType;
import io.kadence.executor.wire.Records.TriggerRecord;
import io.kadence.executor.wire.Records.TriggerType;
import java.util.List;
import org.junit.jupiter.api.Test;

class DispatchTest {
    private static long offsets;

    static Pending pending(long job, String id, BlockStrategy strategy, long scheduledAt) {
        TriggerRecord trigger = new TriggerRecord(id, 1, job, "app", "h", "", 0, 1, strategy, 0, TriggerType.CRON,
                scheduledAt, 0, 0, GlueType.BEAN, null, null, null, null);
        return new Pending(trigger, 0, offsets++, 0, null);
    }

    private final Dispatch dispatch = new Dispatch("e-1", 2);

    private static Run started(List<Dispatch.Step> steps) {
        assertEquals(1, steps.size(), steps.toString());
        return assertInstanceOf(Dispatch.Start.class, steps.get(0)).run();
    }

    @Test
    void serialExecutionQueuesBehindTheRunningRun() {
        Run first = started(dispatch.admit(pending(1, "1-a", BlockStrategy.SERIAL_EXECUTION, 0), 10));
        assertEquals(List.of(), dispatch.admit(pending(1, "1-b", BlockStrategy.SERIAL_EXECUTION, 0), 10));
        assertEquals(List.of(1L), dispatch.queuedJobs());
        Run second = started(dispatch.finished(first));
        assertEquals("1-b", second.triggerId());
        assertEquals(List.of(), dispatch.finished(second));
        assertEquals(List.of(), dispatch.runningJobs());
    }

    @Test
    void discardLaterRefusesWithTheProtocolsText() {
        started(dispatch.admit(pending(5, "5-a", BlockStrategy.DISCARD_LATER, 0), 10));
        List<Dispatch.Step> steps = dispatch.admit(pending(5, "5-b", BlockStrategy.DISCARD_LATER, 0), 10);
        Dispatch.Refuse refuse = assertInstanceOf(Dispatch.Refuse.class, steps.get(0));
        assertEquals("discarded: job 5 is already running or queued on executor e-1 (block strategy DISCARD_LATER)",
                refuse.message());
    }

    @Test
    void coverEarlyStopsTheRunningAndRefusesTheQueued() {
        Run running = started(dispatch.admit(pending(3, "3-a", BlockStrategy.SERIAL_EXECUTION, 0), 10));
        dispatch.admit(pending(3, "3-b", BlockStrategy.SERIAL_EXECUTION, 0), 10);
        List<Dispatch.Step> steps = dispatch.admit(pending(3, "3-c", BlockStrategy.COVER_EARLY, 0), 10);
        String reason = "covered by trigger 3-c (block strategy COVER_EARLY)";
        assertEquals(reason, running.outcome().join().message());
        assertTrue(running.isCancelled());
        assertEquals(reason, assertInstanceOf(Dispatch.Refuse.class, steps.get(0)).message());
        assertEquals("3-c", assertInstanceOf(Dispatch.Start.class, steps.get(1)).run().triggerId());
        // A later KILL does not change what the covered run says: the first reason wins.
        running.stop("killed: requested by an operator");
        assertEquals(reason, running.outcome().join().message());
    }

    @Test
    void concurrentRunsUpToTheCapThenQueues() {
        Run a = started(dispatch.admit(pending(9, "9-a", BlockStrategy.CONCURRENT, 0), 10));
        started(dispatch.admit(pending(9, "9-b", BlockStrategy.CONCURRENT, 0), 10));
        assertEquals(List.of(), dispatch.admit(pending(9, "9-c", BlockStrategy.CONCURRENT, 0), 10));
        assertEquals("9-c", started(dispatch.finished(a)).triggerId());
    }

    @Test
    void earlyTriggersAreHeldUntilTheirMillisecond() {
        assertEquals(List.of(), dispatch.admit(pending(4, "4-a", BlockStrategy.SERIAL_EXECUTION, 500), 100));
        assertEquals(List.of(4L), dispatch.queuedJobs());
        assertEquals(500L, dispatch.nextReleaseMs());
        assertEquals(List.of(), dispatch.releaseDue(499));
        assertEquals("4-a", started(dispatch.releaseDue(500)).triggerId());
        assertNull(dispatch.nextReleaseMs());
    }

    @Test
    void aKillStopsRunningAndRefusesQueuedAndHeldRunsOfItsJob() {
        Run running = started(dispatch.admit(pending(2, "2-a", BlockStrategy.SERIAL_EXECUTION, 0), 10));
        dispatch.admit(pending(2, "2-b", BlockStrategy.SERIAL_EXECUTION, 0), 10);
        dispatch.admit(pending(2, "2-c", BlockStrategy.SERIAL_EXECUTION, 99), 10);
        Run other = started(dispatch.admit(pending(8, "8-a", BlockStrategy.SERIAL_EXECUTION, 0), 10));
        ControlRecord kill = new ControlRecord(ControlCommand.KILL, "app", 2L, null, null, 20);
        List<Dispatch.Step> steps = dispatch.kill(2L, null, RememberedKills.message(kill));
        assertEquals("killed: requested by an operator", running.outcome().join().message());
        assertEquals(2, steps.size());
        assertFalse(other.outcome().isDone());
        assertEquals(0, dispatch.heldCount());
    }

    @Test
    void aRememberedKillCoversTriggersEmittedBeforeIt() {
        RememberedKills kills = new RememberedKills(1_000);
        kills.remember(new ControlRecord(ControlCommand.KILL, "app", 2L, null, "stuck", 100), 150);
        TriggerRecord before = pending(2, "2-a", BlockStrategy.SERIAL_EXECUTION, 0).trigger();
        assertEquals("killed: stuck", kills.covering(before, 200));
        TriggerRecord after = new TriggerRecord("2-b", 1, 2, "app", "h", "", 0, 1, BlockStrategy.SERIAL_EXECUTION, 0,
                TriggerType.CRON, 0, 101, 0, GlueType.BEAN, null, null, null, null);
        assertNull(kills.covering(after, 200));
        assertNull(kills.covering(before, 2_000), "forgotten past the kill memory");
    }

    @Test
    void removingWaitingTriggersLeavesRunningOnes() {
        started(dispatch.admit(pending(6, "6-a", BlockStrategy.SERIAL_EXECUTION, 0), 10));
        dispatch.admit(pending(6, "6-b", BlockStrategy.SERIAL_EXECUTION, 0), 10);
        dispatch.admit(pending(7, "7-a", BlockStrategy.SERIAL_EXECUTION, 50), 10);
        assertEquals(2, dispatch.removeWaiting(p -> true).size());
        assertEquals(List.of(6L), dispatch.runningJobs());
        assertEquals(List.of(), dispatch.queuedJobs());
    }

    @Test
    void redeliveriesAreRecognisedUntilForgotten() {
        RecentTriggers recent = new RecentTriggers(2);
        assertTrue(recent.insert("1-a"));
        assertFalse(recent.insert("1-a"));
        recent.forget("1-a");
        assertTrue(recent.insert("1-a"));
        recent.insert("1-b");
        recent.insert("1-c");
        assertTrue(recent.insert("1-a"), "the oldest is forgotten past the capacity");
    }
}
