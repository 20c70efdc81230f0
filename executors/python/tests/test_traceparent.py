"""Trace context of answers (PROTOCOL.md section 3), without Kafka."""

import unittest

from kadence_executor.traceparent import HEADER, answer_header, parse

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TRIGGER_SPAN = "00f067aa0ba902b7"


def header(value):
    return [(HEADER, value.encode("ascii"))]


class Answers(unittest.TestCase):
    def test_an_answer_keeps_the_trace_and_flags_under_a_span_of_its_own(self):
        [(key, value)] = answer_header(header(f"00-{TRACE}-{TRIGGER_SPAN}-01"))
        self.assertEqual(key, HEADER)
        version, trace, span, flags = value.decode("ascii").split("-")
        self.assertEqual((version, trace, flags), ("00", TRACE, "01"))
        self.assertEqual(len(span), 16)
        self.assertNotEqual(span, TRIGGER_SPAN, "the trigger's span is the scheduler's")
        self.assertNotEqual(span, "0" * 16)

    def test_an_unsampled_trace_stays_unsampled(self):
        [(_, value)] = answer_header(header(f"00-{TRACE}-{TRIGGER_SPAN}-00"))
        self.assertTrue(value.decode("ascii").endswith("-00"))

    def test_triggers_without_a_valid_traceparent_get_answers_without_one(self):
        for headers in (
            None,
            [],
            [("other", b"x")],
            header("00-not-a-trace"),
            header(f"ff-{TRACE}-{TRIGGER_SPAN}-01"),
            header(f"00-{'0' * 32}-{TRIGGER_SPAN}-01"),
            header(f"00-{TRACE}-{'0' * 16}-01"),
            header(f"00-{TRACE}-{TRIGGER_SPAN}-01-extra"),
            [(HEADER, b"\xff\xfe")],
        ):
            with self.subTest(headers=headers):
                self.assertEqual(answer_header(headers), [])

    def test_a_later_version_may_append_fields(self):
        self.assertEqual(parse(header(f"01-{TRACE}-{TRIGGER_SPAN}-01-more")), (TRACE, "01"))


if __name__ == "__main__":
    unittest.main()
