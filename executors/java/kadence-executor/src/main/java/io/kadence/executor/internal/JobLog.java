package io.kadence.executor.internal;

import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharsetEncoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * A run's log lines (PROTOCOL.md section 6 and the protocol decisions on logs), buffered until
 * shipped: every 250 ms while the run goes, and all of them before its result.
 *
 * <ul>
 *   <li>A text with newlines is several lines (a trailing newline adds none, a {@code \r}
 *       before it is dropped), as the Rust SDK reads them.
 *   <li>A line is at most {@value #MAX_LINE_BYTES} bytes of UTF-8: a longer one is cut at a
 *       character boundary, with {@code … [cut at 4096 bytes]} appended.
 *   <li>A run keeps at most {@code maxLines} lines (10 000 by default); the final take says in a
 *       last line how many more were dropped.
 *   <li>A {@code LogRecord} carries at most {@value #LINES_PER_RECORD} lines and at most
 *       {@value #MAX_RECORD_TEXT_BYTES} bytes of line text, far below Kafka's 1 MB default.
 * </ul>
 * Lines are numbered from 1 per run; the chunks of one run follow each other without gaps.
 */
public final class JobLog {
    public static final int MAX_LINE_BYTES = 4096;
    public static final int LINES_PER_RECORD = 500;
    public static final int MAX_RECORD_TEXT_BYTES = 256 * 1024;
    public static final int DEFAULT_MAX_LINES = 10_000;

    /** Consecutive lines of one record: the number of the first, the lines. */
    public record Chunk(long firstLine, List<String> lines) {}

    private final int maxLines;
    private final List<String> pending = new ArrayList<>();
    private final List<Integer> pendingBytes = new ArrayList<>();
    private long nextLine = 1;
    private int kept;
    private long dropped;
    private long undelivered;

    public JobLog(int maxLines) {
        this.maxLines = maxLines;
    }

    /** Appends {@code text} (several lines if it has newlines). */
    public synchronized void log(String text) {
        for (String line : lines(text)) {
            if (kept >= maxLines) {
                dropped++;
                continue;
            }
            kept++;
            String bounded = bound(line);
            pending.add(bounded);
            pendingBytes.add(utf8Length(bounded));
        }
    }

    /** {@code lines} were shipped but never acknowledged (dropped after the client's retries). */
    public synchronized void undeliverable(int lines) {
        undelivered += lines;
    }

    /** Lines shipped and never acknowledged so far: the run's last line says so. */
    public synchronized long undelivered() {
        return undelivered;
    }

    /** Whether lines (or the note on dropped ones) wait to be shipped. */
    public synchronized boolean hasUnshipped() {
        return !pending.isEmpty() || dropped > 0;
    }

    /** The lines written since the last take, in records' worth of chunks; {@code finishing}
     * adds the note on dropped lines (the run has ended). */
    public synchronized List<Chunk> take(boolean finishing) {
        if (finishing && dropped > 0) {
            String note = "[kadence] " + dropped + " more lines were dropped: a run keeps at most "
                    + maxLines + " lines";
            pending.add(note);
            pendingBytes.add(utf8Length(note));
            dropped = 0;
        }
        List<Chunk> chunks = new ArrayList<>();
        int at = 0;
        while (at < pending.size()) {
            int bytes = 0;
            int end = at;
            while (end < pending.size() && end - at < LINES_PER_RECORD
                    && (end == at || bytes + pendingBytes.get(end) <= MAX_RECORD_TEXT_BYTES)) {
                bytes += pendingBytes.get(end);
                end++;
            }
            chunks.add(new Chunk(nextLine, List.copyOf(pending.subList(at, end))));
            nextLine += end - at;
            at = end;
        }
        pending.clear();
        pendingBytes.clear();
        return chunks;
    }

    static List<String> lines(String text) {
        List<String> lines = new ArrayList<>();
        if (text == null || text.isEmpty()) {
            return lines;
        }
        int start = 0;
        while (start < text.length()) {
            int newline = text.indexOf('\n', start);
            int end = newline < 0 ? text.length() : newline;
            String line = text.substring(start, end);
            if (newline >= 0 && line.endsWith("\r")) {
                line = line.substring(0, line.length() - 1);
            }
            lines.add(line);
            if (newline < 0) {
                break;
            }
            start = newline + 1;
        }
        return lines;
    }

    /** {@code line} cut to {@value #MAX_LINE_BYTES} bytes of UTF-8 at a character boundary. */
    static String bound(String line) {
        if (line.length() * 3 <= MAX_LINE_BYTES || utf8Length(line) <= MAX_LINE_BYTES) {
            return line;
        }
        CharsetEncoder encoder = StandardCharsets.UTF_8.newEncoder();
        ByteBuffer out = ByteBuffer.allocate(MAX_LINE_BYTES);
        CharBuffer in = CharBuffer.wrap(line);
        // Encodes whole characters while they fit: stops before the one that would not.
        encoder.encode(in, out, true);
        return line.substring(0, in.position()) + "… [cut at " + MAX_LINE_BYTES + " bytes]";
    }

    static int utf8Length(String text) {
        int bytes = 0;
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c < 0x80) {
                bytes += 1;
            } else if (c < 0x800) {
                bytes += 2;
            } else if (Character.isHighSurrogate(c) && i + 1 < text.length()
                    && Character.isLowSurrogate(text.charAt(i + 1))) {
                bytes += 4;
                i++;
            } else {
                bytes += 3;
            }
        }
        return bytes;
    }
}
