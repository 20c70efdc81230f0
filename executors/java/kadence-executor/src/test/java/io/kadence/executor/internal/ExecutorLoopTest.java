package io.kadence.executor.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.kadence.executor.wire.Codec;
import io.kadence.executor.wire.Records.ExecutorBeat;
import io.kadence.executor.wire.Records.ExecutorState;
import io.kadence.executor.wire.TrustedKeys;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ExecutorLoopTest {
    private static ExecutorLoop loop() {
        Settings settings = new Settings("b", "billing", "kadence", "e-1", true, false, false, TrustedKeys.none(), null,
                Duration.ofSeconds(10), Duration.ofSeconds(3), Duration.ofSeconds(1), Duration.ofSeconds(30),
                Duration.ofSeconds(5), Duration.ofHours(24), 20_000, 16, 10_000, null, Map.of());
        RunLauncher launcher = new RunLauncher() {
            public List<String> names() {
                return List.of("report");
            }

            public boolean runsScripts() {
                return false;
            }

            public boolean has(String name) {
                return name.equals("report");
            }

            public void launch(Run run, JobLog log, boolean shadow) {}

            public void destroyAll() {}
        };
        return new ExecutorLoop(settings, launcher, new Metrics("billing", false));
    }

    /** The scheduler signs an app's triggers by the round only while its executors' beats say
     * they verify them (PROTOCOL.md section 3), so the running and the stopping beats say so. */
    @Test
    void everyBeatListsRoundSignaturesAndGoesAsV2() throws Exception {
        ExecutorLoop loop = loop();
        for (ExecutorState state : ExecutorState.values()) {
            ExecutorBeat beat = loop.beatRecord(state, List.of(0, 1), List.of(42L), List.of());
            assertEquals(List.of("round-signatures"), beat.features());
            byte[] framed = Codec.encode(beat);
            assertEquals(Codec.BEAT_V2, ((framed[3] & 0xff) << 8) | (framed[4] & 0xff));
            assertEquals(beat, Codec.decodeBeat(framed));
        }
    }
}
