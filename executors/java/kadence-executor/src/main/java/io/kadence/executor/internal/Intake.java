package io.kadence.executor.internal;

import io.kadence.executor.wire.Codec;
import io.kadence.executor.wire.CodecException;
import io.kadence.executor.wire.Records.GlueType;
import io.kadence.executor.wire.Records.TriggerRecord;
import io.kadence.executor.wire.Traceparent;
import io.kadence.executor.wire.TrustedKeys;
import io.kadence.executor.wire.VerifyException;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * What becomes of a received trigger record, in the order of checks of the protocol decisions
 * (rule 7): (1) the signature, when keys are trusted, over the exact value bytes; (2) a null
 * value; (3, 4, 5) framing, the Avro datum and its fields ({@link Codec}); (6) the validity
 * window; then the redelivery memory, remembered KILLs and the handler. Only the consumer's
 * thread uses it; it decides and remembers the trigger id, the loop carries the decision out.
 */
final class Intake {
    /** What to do with a record. */
    sealed interface Verdict permits Take, Answer, CannotTake, Redelivered {}

    /** Hold or place it (the dispatch decides). */
    record Take(Pending pending) implements Verdict {}

    /** Answer it with 500 {@code message} without running it (a remembered KILL, no handler). */
    record Answer(Pending pending, String message) implements Verdict {}

    /** It never runs: dead-letter it (a shadow skips it), {@code kind} a metric label. */
    record CannotTake(String kind, String reason) implements Verdict {}

    /** It ran or runs here already: done without running it. */
    record Redelivered(String triggerId) implements Verdict {}

    private final String topic;
    private final String executorId;
    private final TrustedKeys trustedKeys;
    private final RecentTriggers recent;
    private final RememberedKills kills;
    private final RunLauncher launcher;

    Intake(Settings settings, RecentTriggers recent, RememberedKills kills, RunLauncher launcher) {
        this.topic = settings.triggerTopic();
        this.executorId = settings.executorId();
        this.trustedKeys = settings.trustedKeys();
        this.recent = recent;
        this.kills = kills;
        this.launcher = launcher;
    }

    Verdict admit(ConsumerRecord<byte[], byte[]> record, long nowMs) {
        if (!trustedKeys.isEmpty()) {
            try {
                trustedKeys.verify(topic, record.partition(), record.value(), record.headers());
            } catch (VerifyException refused) {
                return new CannotTake(refused.kind(), "refused trigger record: " + refused.getMessage());
            }
        }
        if (record.value() == null) {
            return new CannotTake("no_value", "trigger record has no value");
        }
        TriggerRecord trigger;
        try {
            trigger = Codec.decodeTrigger(record.value());
        } catch (CodecException error) {
            return new CannotTake("undecodable", "undecodable trigger record: " + error.getMessage());
        }
        String expired = expiredReason(trigger, nowMs);
        if (expired != null) {
            return new CannotTake("expired", expired);
        }
        Pending pending = new Pending(trigger, record.partition(), record.offset(), nowMs,
                Traceparent.answer(record.headers()));
        if (!recent.insert(trigger.triggerId())) {
            return new Redelivered(trigger.triggerId());
        }
        String killed = kills.covering(trigger, nowMs);
        if (killed != null) {
            return new Answer(pending, killed);
        }
        String refusal = refusal(trigger);
        return refusal != null ? new Answer(pending, refusal) : new Take(pending);
    }

    /** The dead letter's reason when {@code trigger} arrived past its validity window, worded
     * as the Rust SDK's; null while valid or without a window. */
    static String expiredReason(TriggerRecord trigger, long nowMs) {
        Long expiresAt = trigger.expiresAtMs();
        if (expiresAt == null || nowMs <= expiresAt) {
            return null;
        }
        return "expired trigger record: " + trigger.triggerId() + " was valid until " + expiresAt
                + " (ms since the epoch) and arrived " + (nowMs - expiresAt) + " ms later; a copy, or a trigger "
                + "that waited in its topic past its validity";
    }

    /** Why this executor cannot run {@code trigger} (no such handler, scripts off), or null. */
    private String refusal(TriggerRecord trigger) {
        if (trigger.glueType() != GlueType.BEAN) {
            return launcher.runsScripts() ? null : "executor " + executorId + " does not run scripts ("
                    + trigger.glueType() + "): script handlers are switched off";
        }
        if (!launcher.has(trigger.handler())) {
            return "executor " + executorId + " has no handler named \"" + trigger.handler() + "\" (it has: "
                    + String.join(", ", launcher.names()) + ")";
        }
        return null;
    }
}
