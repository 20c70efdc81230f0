package io.kadence.executor.wire;

import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;

/**
 * Trace context (PROTOCOL.md section 3): a result continues the trace its trigger started. The
 * trigger's {@code traceparent} (W3C) names the scheduler's dispatch span; the result carries
 * one with the same trace id and flags and a span id of this executor's own: 8 random bytes, not
 * all zero (this SDK exports no spans, and the id still puts the scheduler's completion in the
 * run's trace). A trigger without a valid header (absent, malformed, version {@code ff}, an
 * all-zero id) is answered without one.
 */
public final class Traceparent {
    public static final String HEADER = "traceparent";
    private static final Pattern FORMAT =
            Pattern.compile("([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?");
    private static final SecureRandom RANDOM = new SecureRandom();

    private Traceparent() {}

    /** The {@code traceparent} value a result answering a trigger with {@code headers} carries,
     * or null when the trigger has no valid one. */
    public static String answer(Headers headers) {
        Header header = headers == null ? null : headers.lastHeader(HEADER);
        if (header == null || header.value() == null) {
            return null;
        }
        return answer(new String(header.value(), StandardCharsets.US_ASCII));
    }

    /** The answer's {@code traceparent} for the trigger's {@code value}, or null. */
    public static String answer(String value) {
        Matcher found = FORMAT.matcher(value.strip());
        if (!found.matches()) {
            return null;
        }
        String version = found.group(1);
        String traceId = found.group(2);
        String spanId = found.group(3);
        if (version.equals("ff") || (version.equals("00") && found.group(5) != null)) {
            return null;
        }
        if (traceId.equals("0".repeat(32)) || spanId.equals("0".repeat(16))) {
            return null;
        }
        return "00-" + traceId + "-" + newSpanId() + "-" + found.group(4);
    }

    private static String newSpanId() {
        byte[] bytes = new byte[8];
        String id;
        do {
            RANDOM.nextBytes(bytes);
            id = HexFormat.of().formatHex(bytes);
        } while (id.equals("0".repeat(16)));
        return id;
    }
}
