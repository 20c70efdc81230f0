package io.kadence.executor.wire;

import java.util.regex.Pattern;

/**
 * The identifier rules of PROTOCOL.md sections 1 and 2, with the Rust SDK's messages (a
 * decoded record that breaks one is refused as {@code invalid {record}: {message}}).
 */
public final class Ids {
    private static final Pattern TRIGGER_ID_CHARS = Pattern.compile("[A-Za-z0-9_-]*");
    private static final Pattern APP_NAME = Pattern.compile("[A-Za-z0-9_-]{1,64}");
    private static final Pattern TOPIC_PREFIX = Pattern.compile("[A-Za-z0-9._-]{1,64}");
    private static final Pattern DIGITS = Pattern.compile("[0-9]+");

    private Ids() {}

    /** Throws unless {@code text} is a trigger id: 3–128 of A-Z a-z 0-9 - _, starting with the
     * (positive) job id and a dash. */
    public static void checkTriggerId(String text) throws IllegalArgumentException {
        if (text.length() < 3 || text.length() > 128) {
            throw triggerId(text, "use 3 to 128 characters");
        }
        if (!TRIGGER_ID_CHARS.matcher(text).matches()) {
            throw triggerId(text, "use only A-Z a-z 0-9 - _");
        }
        int dash = text.indexOf('-');
        if (dash < 0 || dash == text.length() - 1 || !isJobId(text.substring(0, dash))) {
            throw triggerId(text, "it must start with the job id and a dash");
        }
    }

    private static boolean isJobId(String digits) {
        if (!DIGITS.matcher(digits).matches()) {
            return false;
        }
        try {
            return Long.parseLong(digits) > 0;
        } catch (NumberFormatException tooLarge) {
            return false;
        }
    }

    /** Throws unless {@code id} is a job id (positive). */
    public static void checkJobId(long id) {
        if (id <= 0) {
            throw new IllegalArgumentException("invalid job id " + quote(Long.toString(id))
                    + ": use a positive integer");
        }
    }

    /** Throws unless {@code app} is an app name. */
    public static void checkAppName(String app) {
        if (!APP_NAME.matcher(app).matches()) {
            throw new IllegalArgumentException("invalid app name " + quote(app)
                    + ": use 1 to 64 characters from A-Z a-z 0-9 _ -");
        }
    }

    /** Throws unless {@code prefix} is a topic prefix. */
    public static void checkTopicPrefix(String prefix) {
        if (!TOPIC_PREFIX.matcher(prefix).matches()) {
            throw new IllegalArgumentException("invalid topic prefix " + quote(prefix)
                    + ": use 1 to 64 characters from A-Z a-z 0-9 . _ -");
        }
    }

    private static IllegalArgumentException triggerId(String text, String reason) {
        return new IllegalArgumentException("invalid trigger id " + quote(text) + ": " + reason);
    }

    /** {@code text} in double quotes, with quotes, backslashes and control characters escaped
     * as Rust's {@code {:?}} shows them. */
    public static String quote(String text) {
        StringBuilder out = new StringBuilder("\"");
        text.codePoints().forEach(c -> {
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (Character.isISOControl(c)) {
                        out.append(String.format("\\u{%x}", c));
                    } else {
                        out.appendCodePoint(c);
                    }
                }
            }
        });
        return out.append('"').toString();
    }
}
