package io.kadence.executor.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class OffsetTrackerTest {
    @Test
    void commitsUpToTheLowestOffsetNotDone() {
        OffsetTracker tracker = new OffsetTracker();
        tracker.track(0, 10);
        tracker.track(0, 11);
        tracker.track(0, 12);
        assertEquals(Map.of(0, 10L), tracker.takeCommittable());
        tracker.complete(0, 11);
        tracker.complete(0, 12);
        assertEquals(Map.of(), tracker.takeCommittable(), "10 is still running");
        tracker.complete(0, 10);
        assertEquals(Map.of(0, 13L), tracker.takeCommittable());
    }

    @Test
    void anUnpublishedAnswerHoldsItsPartitionBackUntilItIsLeft() {
        OffsetTracker tracker = new OffsetTracker();
        tracker.track(1, 5);
        tracker.track(1, 6);
        tracker.complete(1, 6);
        assertEquals(Map.of(1, 5L), tracker.takeCommittable());
        assertEquals(Map.of(), tracker.release(List.of(1)), "5 was taken already");
        tracker.track(2, 0);
        tracker.drop(List.of(2));
        assertEquals(Map.of(), tracker.takeCommittable(), "nothing of a lost partition is committed");
    }

    @Test
    void aFailedCommitIsTriedAgain() {
        OffsetTracker tracker = new OffsetTracker();
        tracker.track(0, 1);
        tracker.complete(0, 1);
        assertEquals(Map.of(0, 2L), tracker.takeCommittable());
        tracker.commitFailed(List.of(0));
        assertEquals(Map.of(0, 2L), tracker.takeCommittable());
    }
}
