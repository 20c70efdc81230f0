package io.kadence.executor.internal;

import io.kadence.executor.wire.Records.ControlRecord;
import io.kadence.executor.wire.Records.TriggerRecord;
import java.util.ArrayList;
import java.util.List;

/**
 * KILLs remembered for the kill memory (PROTOCOL.md section 5): a KILL of a run covers that
 * run whenever it arrives; a KILL of a job covers the job's triggers emitted at or before the
 * KILL was requested. Only the consumer's thread uses it.
 */
public final class RememberedKills {
    private record Kill(Long jobId, String triggerId, long requestedAtMs, String reason) {}

    private final long memoryMs;
    private final List<Kill> kills = new ArrayList<>();

    public RememberedKills(long memoryMs) {
        this.memoryMs = memoryMs;
    }

    /** The result message of a run a KILL stops. */
    public static String message(ControlRecord command) {
        String reason = command.reason();
        return "killed: " + (reason == null || reason.isEmpty() ? "requested by an operator" : reason);
    }

    public void remember(ControlRecord command, long nowMs) {
        forget(nowMs);
        if (command.requestedAtMs() >= nowMs - memoryMs) {
            kills.add(new Kill(command.jobId(), command.triggerId(), command.requestedAtMs(), message(command)));
        }
    }

    /** The message of the KILL that covers {@code trigger}, or null. */
    public String covering(TriggerRecord trigger, long nowMs) {
        forget(nowMs);
        for (Kill kill : kills) {
            if (kill.triggerId() != null) {
                if (kill.triggerId().equals(trigger.triggerId())) {
                    return kill.reason();
                }
            } else if (kill.jobId() != null && kill.jobId() == trigger.jobId()
                    && trigger.emittedAtMs() <= kill.requestedAtMs()) {
                return kill.reason();
            }
        }
        return null;
    }

    private void forget(long nowMs) {
        long oldest = nowMs - memoryMs;
        kills.removeIf(kill -> kill.requestedAtMs() < oldest);
    }
}
