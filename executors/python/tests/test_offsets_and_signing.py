"""Offset commits and signature checks, without Kafka."""

import base64
import unittest

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from kadence_executor.offsets import OffsetTracker
from kadence_executor.signing import (
    SIGNATURE, SIGNATURE_KEY, TrustedKeys, VerifyError, key_id, signed_message,
)


class Offsets(unittest.TestCase):
    def test_commits_stop_at_the_lowest_unanswered_trigger(self):
        tracker = OffsetTracker()
        for offset in (10, 11, 12):
            tracker.track(0, offset)
        tracker.complete(0, 11)
        self.assertEqual(tracker.take_committable(), [(0, 10)])
        tracker.complete(0, 10)
        self.assertEqual(tracker.take_committable(), [(0, 12)])
        self.assertEqual(tracker.take_committable(), [], "nothing moved")
        tracker.complete(0, 12)
        self.assertEqual(tracker.release([0]), [(0, 13)])
        self.assertEqual(tracker.take_committable(), [])


class Signatures(unittest.TestCase):
    def setUp(self):
        self.private = Ed25519PrivateKey.generate()
        raw = self.private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.key_id = key_id(raw)
        self.trusted = TrustedKeys([base64.b64encode(raw).decode()])

    def headers(self, topic, value, key=None):
        signature = self.private.sign(signed_message(topic, value))
        return [
            (SIGNATURE_KEY, (key or self.key_id).encode()),
            (SIGNATURE, base64.b64encode(signature)),
        ]

    def refusal(self, topic, value, headers):
        with self.assertRaises(VerifyError) as raised:
            self.trusted.verify(topic, value, headers)
        return raised.exception.kind, str(raised.exception)

    def test_a_signed_record_verifies_on_its_topic_only(self):
        headers = self.headers("k.triggers.a", b"value")
        self.assertEqual(self.trusted.verify("k.triggers.a", b"value", headers), self.key_id)
        kind, message = self.refusal("k.triggers.b", b"value", headers)
        self.assertEqual(kind, "bad_signature")
        self.assertTrue(message.startswith(f"bad signature by key {self.key_id}"))
        self.assertEqual(self.refusal("k.triggers.a", b"changed", headers)[0], "bad_signature")

    def test_unsigned_unknown_and_malformed_records_are_refused(self):
        kind, message = self.refusal("t", b"v", [])
        self.assertEqual(kind, "unsigned")
        self.assertTrue(message.startswith("unsigned record"))
        self.assertEqual(self.refusal("t", b"v", self.headers("t", b"v", "0" * 16))[0], "unknown_key")
        only_key = [(SIGNATURE_KEY, self.key_id.encode())]
        self.assertEqual(
            self.refusal("t", b"v", only_key)[1],
            "malformed signature header kadence.signature: missing while the other signature "
            "header is there",
        )
        short = [(SIGNATURE_KEY, self.key_id.encode()), (SIGNATURE, base64.b64encode(b"x"))]
        self.assertIn("1 bytes instead of 64", self.refusal("t", b"v", short)[1])

    def test_a_key_that_is_not_ed25519_is_refused_at_start(self):
        with self.assertRaises(ValueError):
            TrustedKeys(["not base64!"])


if __name__ == "__main__":
    unittest.main()


class SecureByDefault(unittest.TestCase):
    def test_an_executor_needs_a_trusted_key_unless_it_opts_out(self):
        from kadence_executor import Executor
        with self.assertRaisesRegex(ValueError, "no trusted key"):
            Executor("b:9092", "billing")
        executor = Executor("b:9092", "billing", allow_unverified=True, allow_unsigned=True)
        self.assertTrue(executor.settings.allow_unverified)
