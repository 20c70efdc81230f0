package io.kadence.executor;

/**
 * Kafka's group protocol the executor joins its group with (PROTOCOL.md section 1).
 * {@link #CLASSIC}: the executor sets its session timeout and heartbeat, and every member names
 * the {@code range} assignor (eager rebalances). {@link #CONSUMER}: KIP-848, the broker keeps
 * the session and divides the partitions (Apache Kafka 4 and later).
 */
public enum GroupProtocol {
    CLASSIC,
    CONSUMER;

    /** {@code classic} or {@code consumer}, any case. */
    public static GroupProtocol parse(String text) {
        return switch (text.strip().toLowerCase(java.util.Locale.ROOT)) {
            case "classic" -> CLASSIC;
            case "consumer" -> CONSUMER;
            default -> throw new IllegalArgumentException("group protocol must be classic or consumer, not " + text);
        };
    }
}
