"""Executor keys (PROTOCOL.md section 3), without Kafka: the protocol's test vector, the key
texts refused at start (never echoing the secret), the key required unless the operator opts
out, and every record the executor produces (result, shadow result, log record, beat, dead
letter) carrying both headers, signed over the topic it goes to. The signatures are checked
here with ``hmac`` directly, not with the code under test."""

import base64
import hashlib
import hmac
import threading
import unittest

from kadence_executor import Executor
from kadence_executor.consumer import Loop, Pending
from kadence_executor.demo import executor_from
from kadence_executor.dispatch import Stop
from kadence_executor.executor import Settings
from kadence_executor.signing import EXECUTOR_KEY, EXECUTOR_SIGNATURE, ExecutorKey

from .test_codec import trigger

# The protocol's test vector: the secret bytes are 0, 1, ..., 31.
KEY_ID = "0123456789abcdef"
SECRET_TEXT = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"
KEY = f"{KEY_ID}.{SECRET_TEXT}"
SECRET = bytes(range(32))


def expected_signature(topic, value):
    message = b"kadence-executor-v1\n" + topic.encode() + b"\n" + value
    return base64.b64encode(hmac.new(SECRET, message, hashlib.sha256).digest())


def unpadded(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


class Vector(unittest.TestCase):
    def test_the_protocols_test_vector(self):
        key = ExecutorKey(KEY)
        value = bytes.fromhex("00000007d168656c6c6f")
        self.assertEqual(key.key_id, KEY_ID)
        self.assertEqual(
            key.sign("kadence.results", value), b"NWdDj5mX85f2963FIKyZ1SaPJJgjDZmOPqgfu4HvdiI="
        )
        self.assertEqual(
            key.headers("kadence.results", value),
            [
                (EXECUTOR_KEY, KEY_ID.encode()),
                (EXECUTOR_SIGNATURE, b"NWdDj5mX85f2963FIKyZ1SaPJJgjDZmOPqgfu4HvdiI="),
            ],
        )

    def test_the_signature_covers_the_topic_and_the_value(self):
        key = ExecutorKey(KEY)
        signed = key.sign("kadence.results", b"value")
        self.assertNotEqual(key.sign("kadence.shadow-results", b"value"), signed)
        self.assertNotEqual(key.sign("kadence.results", b"valuf"), signed)

    def test_surrounding_whitespace_is_not_part_of_the_key(self):
        self.assertEqual(ExecutorKey(f"  {KEY}\n").sign("t", b"v"), ExecutorKey(KEY).sign("t", b"v"))


class MalformedKeys(unittest.TestCase):
    """Each text is refused with what is wrong, and the message never shows its secret."""

    def refusal(self, text, secret):
        with self.assertRaises(ValueError) as raised:
            ExecutorKey(text)
        message = str(raised.exception)
        self.assertNotIn(secret, message)
        self.assertNotIn(SECRET_TEXT[:8], message)
        self.assertIn("`kadence executor-key create --app APP`", message)
        return message

    def test_a_key_id_of_the_wrong_length(self):
        for key_id in ("0123456789abcde", "0123456789abcdef0", ""):
            message = self.refusal(f"{key_id}.{SECRET_TEXT}", SECRET_TEXT)
            self.assertIn(f"its key id (before the dot) is {len(key_id)} characters, not 16", message)

    def test_a_key_id_in_upper_case(self):
        message = self.refusal(f"0123456789ABCDEF.{SECRET_TEXT}", SECRET_TEXT)
        self.assertIn("not all lowercase hex digits", message)

    def test_a_missing_dot(self):
        message = self.refusal(KEY_ID + SECRET_TEXT, SECRET_TEXT)
        self.assertIn("it has no dot", message)

    def test_the_parts_swapped(self):
        message = self.refusal(f"{SECRET_TEXT}.{KEY_ID}", SECRET_TEXT)
        self.assertIn("is 43 characters, not 16", message)

    def test_a_secret_that_is_not_unpadded_base64url(self):
        standard = base64.b64encode(bytes([251] * 32)).decode().rstrip("=")  # has + and /
        spaced = SECRET_TEXT[:20] + " " + SECRET_TEXT[21:]
        for secret in (standard, SECRET_TEXT + "=", SECRET_TEXT[:-1] + ".", spaced):
            message = self.refusal(f"{KEY_ID}.{secret}", secret)
            self.assertIn(f"the secret of key {KEY_ID} has characters outside unpadded", message)

    def test_a_secret_of_31_or_33_bytes(self):
        for size in (31, 33):
            secret = unpadded(bytes(range(size)))
            message = self.refusal(f"{KEY_ID}.{secret}", secret)
            self.assertIn(f"decodes to {size} bytes instead of 32", message)

    def test_a_secret_that_cannot_be_base64_at_all(self):
        secret = SECRET_TEXT + "AB"  # 45 characters: no whole number of bytes
        message = self.refusal(f"{KEY_ID}.{secret}", secret)
        self.assertIn("is 45 characters, not 43", message)

    def test_an_empty_secret(self):
        message = self.refusal(f"{KEY_ID}.", SECRET_TEXT)
        self.assertIn("decodes to 0 bytes instead of 32", message)

    def test_a_secret_whose_last_character_is_not_canonical(self):
        # "8" ends the secret with zero bits; "9" decodes to the same bytes with one set.
        secret = SECRET_TEXT[:-1] + "9"
        message = self.refusal(f"{KEY_ID}.{secret}", secret)
        self.assertIn("its last character is not canonical", message)

    def test_the_key_never_shows_its_secret(self):
        key = ExecutorKey(KEY)
        self.assertEqual(repr(key), f"ExecutorKey({KEY_ID})")
        settings = Executor("b:9092", "billing", allow_unverified=True, executor_key=KEY).settings
        self.assertNotIn(SECRET_TEXT, repr(settings))


class RequiredByDefault(unittest.TestCase):
    def test_an_executor_without_a_key_is_refused(self):
        with self.assertRaises(ValueError) as raised:
            Executor("b:9092", "billing", allow_unverified=True)
        message = str(raised.exception)
        self.assertTrue(message.startswith("no executor key"), message)
        self.assertIn("`kadence executor-key create --app APP`", message)
        self.assertIn("allow_unsigned=True", message)

    def test_allow_unsigned_opts_out(self):
        executor = Executor("b:9092", "billing", allow_unverified=True, allow_unsigned=True)
        self.assertIsNone(executor.settings.executor_key)

    def test_a_key_is_taken(self):
        executor = Executor("b:9092", "billing", allow_unverified=True, executor_key=KEY)
        self.assertEqual(executor.settings.executor_key.key_id, KEY_ID)

    def test_a_malformed_key_is_refused_even_when_unsigned_is_allowed(self):
        with self.assertRaisesRegex(ValueError, "it has no dot"):
            Executor("b:9092", "billing", allow_unverified=True, allow_unsigned=True,
                     executor_key=KEY_ID)

    def test_running_unsigned_is_logged_as_an_error_at_start(self):
        with self.assertLogs("kadence_executor", level="ERROR") as seen:
            loop(executor_key=None)._announce_start()
        unsigned = [line for line in seen.output if "RUNNING UNSIGNED" in line]
        self.assertEqual(len(unsigned), 1, seen.output)
        self.assertIn("results, logs and beats go unsigned", unsigned[0])
        self.assertIn("requires executor signatures (the default) refuses them", unsigned[0])

    def test_running_signed_logs_no_such_error(self):
        with self.assertLogs("kadence_executor", level="ERROR") as seen:
            loop()._announce_start()  # unverified: that error is logged, and only that one
        self.assertFalse([line for line in seen.output if "UNSIGNED" in line], seen.output)


class Demo(unittest.TestCase):
    """The demo, which the conformance suite launches, reads the key from its environment."""

    ENV = {
        "KADENCE_BROKERS": "b:9092", "KADENCE_APP": "billing", "KADENCE_TOPIC_PREFIX": "kadence",
        "KADENCE_EXECUTOR_ID": "billing-1", "KADENCE_ALLOW_UNVERIFIED": "1",
    }

    def test_the_key_and_the_opt_out_come_from_the_environment(self):
        signed = executor_from({**self.ENV, "KADENCE_EXECUTOR_KEY": KEY})
        self.assertEqual(signed.settings.executor_key.key_id, KEY_ID)
        unsigned = executor_from({**self.ENV, "KADENCE_ALLOW_UNSIGNED": "true"})
        self.assertIsNone(unsigned.settings.executor_key)
        for env in (self.ENV, {**self.ENV, "KADENCE_EXECUTOR_KEY": ""}):
            with self.assertRaisesRegex(ValueError, "no executor key"):
                executor_from(env)
        with self.assertRaisesRegex(ValueError, "it has no dot"):
            executor_from({**self.ENV, "KADENCE_EXECUTOR_KEY": "x", "KADENCE_ALLOW_UNSIGNED": "1"})


class FakeProducer:
    """Records what is produced and acknowledges it at once."""

    def __init__(self):
        self.records = []

    def produce(self, topic, value=None, key=None, headers=None, on_delivery=None):
        self.records.append((topic, value, list(headers or ())))
        if on_delivery is not None:
            on_delivery(None, None)

    def __len__(self):
        return 0


class FakeMessage:
    """A trigger record that is dead-lettered."""

    def topic(self):
        return "kadence.triggers.billing"

    def partition(self):
        return 0

    def offset(self):
        return 41

    def key(self):
        return b"7-1000"

    def value(self):
        return b"garbage"

    def headers(self):
        # The scheduler's signature and trace context stay on the letter; a refusal and an
        # executor signature of before are replaced by the letter's own.
        return [
            ("kadence.signature.key", b"0123456789abcdef"),
            ("kadence.dlq.reason", b"refused before"),
            TRACEPARENT,
            (EXECUTOR_SIGNATURE, b"over another topic"),
        ]


def write(ctx):
    ctx.log("one line")


def loop(shadow=False, executor_key=KEY):
    """A loop whose producer is a ``FakeProducer`` (no broker: the real clients are made, and
    told not to log their failing connections)."""
    settings = Settings(
        brokers="127.0.0.1:9", app="billing", shadow=shadow, kafka_options={"log_level": 0},
        executor_id="billing-1", allow_unverified=True, allow_unsigned=executor_key is None,
        executor_key=None if executor_key is None else ExecutorKey(executor_key),
    )
    settings.check()
    made = Loop(settings, {"report": write}, threading.Event())
    made.consumer.close()
    made.publisher.close(timeout_s=0)
    made.publisher.producer = FakeProducer()
    return made


TRACEPARENT = ("traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")


class EveryRecordIsSigned(unittest.TestCase):
    def records(self, made):
        return made.publisher.producer.records

    def assert_signed(self, record, topic, other_headers=()):
        produced_topic, value, headers = record
        self.assertEqual(produced_topic, topic)
        self.assertEqual(
            headers,
            list(other_headers) + [
                (EXECUTOR_KEY, KEY_ID.encode()),
                (EXECUTOR_SIGNATURE, expected_signature(topic, value)),
            ],
        )

    def test_a_run_signs_its_log_records_and_its_result(self):
        made = loop()
        made.owned = {0}
        made.tracker.track(0, 41)
        made._run(Pending(trigger(), 0, 41, [TRACEPARENT]), Stop())
        log_record, result = self.records(made)
        self.assert_signed(log_record, "kadence.logs")
        self.assert_signed(result, "kadence.results", [TRACEPARENT])

    def test_a_refusal_signs_its_result(self):
        made = loop()
        made._refuse(Pending(trigger(), 0, 41, [TRACEPARENT]), "no handler")
        (result,) = self.records(made)
        self.assert_signed(result, "kadence.results", [TRACEPARENT])

    def test_a_shadow_signs_its_results_over_the_shadow_results_topic(self):
        made = loop(shadow=True)
        made._refuse(Pending(trigger(), 0, 41), "no handler")
        (result,) = self.records(made)
        self.assert_signed(result, "kadence.shadow-results")

    def test_a_beat_is_signed(self):
        made = loop()
        made._beat("RUNNING")
        (beat,) = self.records(made)
        self.assert_signed(beat, "kadence.beats")

    def test_a_dead_letter_keeps_its_headers_and_is_signed_over_the_original_bytes(self):
        made = loop()
        with self.assertLogs("kadence_executor", level="WARNING"):
            made._dead_letter(FakeMessage(), "undecodable trigger record: garbage")
        made.events.get(timeout=5)  # the letter's thread reports back
        (letter,) = self.records(made)
        self.assertEqual(letter[1], b"garbage")
        origin = [
            ("kadence.signature.key", b"0123456789abcdef"),
            TRACEPARENT,
            ("kadence.dlq.reason", b"undecodable trigger record: garbage"),
            ("kadence.dlq.topic", b"kadence.triggers.billing"),
            ("kadence.dlq.partition", b"0"),
            ("kadence.dlq.offset", b"41"),
        ]
        self.assert_signed(letter, "kadence.dlq", origin)

    def test_signing_headers_already_on_a_record_are_replaced(self):
        made = loop()
        stale = [(EXECUTOR_KEY, b"ffffffffffffffff"), TRACEPARENT, (EXECUTOR_SIGNATURE, b"AAAA")]
        made.publisher.send("kadence.results", b"7-1000", b"value", threading.Event(), stale)
        (record,) = self.records(made)
        self.assert_signed(record, "kadence.results", [TRACEPARENT])

    def test_unsigned_records_carry_no_signing_headers(self):
        made = loop(executor_key=None)
        made._beat("RUNNING")
        made._refuse(Pending(trigger(), 0, 41, [TRACEPARENT]), "no handler")
        beat, result = self.records(made)
        self.assertEqual(beat[2], [])
        self.assertEqual(result[2], [TRACEPARENT])


if __name__ == "__main__":
    unittest.main()
