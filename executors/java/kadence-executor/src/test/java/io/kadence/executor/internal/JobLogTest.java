package io.kadence.executor.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

class JobLogTest {
    @Test
    void linesAreNumberedFromOneWithoutGaps() {
        JobLog log = new JobLog(100);
        log.log("a\nb\r\n");
        log.log("");
        assertEquals(List.of(new JobLog.Chunk(1, List.of("a", "b"))), log.take(false));
        log.log("c");
        assertEquals(List.of(new JobLog.Chunk(3, List.of("c"))), log.take(true));
    }

    @Test
    void aLongLineIsCutAtACharacterBoundarySayingSo() {
        String line = "é".repeat(3000); // 6000 bytes
        String cut = JobLog.bound(line);
        assertTrue(cut.endsWith("… [cut at 4096 bytes]"), cut.substring(cut.length() - 30));
        String kept = cut.substring(0, cut.length() - "… [cut at 4096 bytes]".length());
        assertEquals(2048, kept.length());
        assertEquals(4096, kept.getBytes(StandardCharsets.UTF_8).length);
        assertEquals("short", JobLog.bound("short"));
    }

    @Test
    void aRecordHoldsAtMost500LinesAnd256KiBOfText() {
        JobLog log = new JobLog(10_000);
        for (int i = 0; i < 1200; i++) {
            log.log("x");
        }
        List<JobLog.Chunk> chunks = log.take(true);
        assertEquals(List.of(500, 500, 200), chunks.stream().map(c -> c.lines().size()).toList());
        assertEquals(List.of(1L, 501L, 1001L), chunks.stream().map(JobLog.Chunk::firstLine).toList());

        JobLog wide = new JobLog(10_000);
        for (int i = 0; i < 200; i++) {
            wide.log("y".repeat(4000));
        }
        List<JobLog.Chunk> wideChunks = wide.take(true);
        assertEquals(List.of(65, 65, 65, 5), wideChunks.stream().map(c -> c.lines().size()).toList());
    }

    @Test
    void linesPastTheLimitAreDroppedAndTheLastLineSaysHowMany() {
        JobLog log = new JobLog(2);
        log.log("1\n2\n3\n4");
        assertEquals(List.of("1", "2"), log.take(false).get(0).lines());
        List<JobLog.Chunk> last = log.take(true);
        assertEquals(new JobLog.Chunk(3, List.of("[kadence] 2 more lines were dropped: a run keeps at most 2 lines")),
                last.get(0));
    }

    @Test
    void timeoutsAreWordedAsTheProtocolSays() {
        assertEquals("1 s", Runs.humanize(1000));
        assertEquals("1500 ms", Runs.humanize(1500));
    }

    @Test
    void outcomesFollowTheProtocolsMessages() {
        assertEquals("success", Metrics.outcomeOf(200, null));
        assertEquals("timeout", Metrics.outcomeOf(502, "run timed out after 1 s and was cancelled"));
        assertEquals("killed", Metrics.outcomeOf(500, "killed: requested by an operator"));
        assertEquals("covered", Metrics.outcomeOf(500, "covered by trigger 1-2 (block strategy COVER_EARLY)"));
        assertEquals("discarded", Metrics.outcomeOf(500, "discarded: job 1 is already running"));
        assertEquals("unknown_handler", Metrics.outcomeOf(500, "executor e has no handler named \"x\" (it has: )"));
        assertEquals("scripts_off", Metrics.outcomeOf(500, "executor e does not run scripts (GLUE_SHELL): x"));
        assertEquals("failure", Metrics.outcomeOf(500, "boom"));
    }
}
