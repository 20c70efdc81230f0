package io.kadence.executor;

/**
 * The broker the executor talks to (PROTOCOL.md section 7, "Resuming on tansu"). On
 * {@link #TANSU} each assigned partition with a committed offset starts up to 10 000 records
 * before it, the records below it dropped, and fetches wait at most 10 ms.
 */
public enum BrokerKind {
    KAFKA,
    TANSU;

    /** {@code kafka} (also empty) or {@code tansu}, any case. */
    public static BrokerKind parse(String text) {
        return switch (text.strip().toLowerCase(java.util.Locale.ROOT)) {
            case "", "kafka" -> KAFKA;
            case "tansu" -> TANSU;
            default -> throw new IllegalArgumentException("broker kind must be kafka or tansu, not " + text);
        };
    }
}
