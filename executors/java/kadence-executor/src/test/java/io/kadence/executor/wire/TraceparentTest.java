package io.kadence.executor.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import org.junit.jupiter.api.Test;

class TraceparentTest {
    private static final String TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";

    @Test
    void aResultKeepsTheTraceAndFlagsUnderASpanOfItsOwn() {
        String answer = Traceparent.answer("00-" + TRACE + "-00f067aa0ba902b7-01");
        String[] parts = answer.split("-");
        assertEquals("00", parts[0]);
        assertEquals(TRACE, parts[1]);
        assertEquals(16, parts[2].length());
        assertNotEquals("00f067aa0ba902b7", parts[2]);
        assertNotEquals("0000000000000000", parts[2]);
        assertEquals("01", parts[3]);
        assertNotEquals(answer, Traceparent.answer("00-" + TRACE + "-00f067aa0ba902b7-01"));
    }

    @Test
    void anInvalidTraceparentGetsNone() {
        assertNull(Traceparent.answer("ff-" + TRACE + "-00f067aa0ba902b7-01"));
        assertNull(Traceparent.answer("00-" + "0".repeat(32) + "-00f067aa0ba902b7-01"));
        assertNull(Traceparent.answer("00-" + TRACE + "-0000000000000000-01"));
        assertNull(Traceparent.answer("00-" + TRACE.toUpperCase() + "-00f067aa0ba902b7-01"));
        assertNull(Traceparent.answer("00-" + TRACE + "-00f067aa0ba902b7-01-extra"));
        assertNull(Traceparent.answer("garbage"));
        assertEquals(TRACE, Traceparent.answer("01-" + TRACE + "-00f067aa0ba902b7-00-future").split("-")[1]);
    }
}
