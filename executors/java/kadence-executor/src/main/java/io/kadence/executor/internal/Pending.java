package io.kadence.executor.internal;

import io.kadence.executor.wire.Records.TriggerRecord;

/**
 * A received trigger on its way: the record, where it was read, when, and the
 * {@code traceparent} its answer carries (null: none).
 */
public record Pending(TriggerRecord trigger, int partition, long offset, long receivedAtMs, String traceparent) {}
