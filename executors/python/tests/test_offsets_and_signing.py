"""Offset commits and signature checks, without Kafka."""

import base64
import hashlib
import unittest

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from kadence_executor.offsets import OffsetTracker
from kadence_executor.signing import (
    ROUND_PROOF, ROUND_SIGNATURE, SIGNATURE, SIGNATURE_KEY, TrustedKeys, VerifyError, key_id,
    leaf_hash, signed_message,
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
            self.trusted.verify(topic, 0, value, headers)
        return raised.exception.kind, str(raised.exception)

    def test_a_signed_record_verifies_on_its_topic_only(self):
        headers = self.headers("k.triggers.a", b"value")
        self.assertEqual(self.trusted.verify("k.triggers.a", 0, b"value", headers), self.key_id)
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


def _node(left, right):
    return hashlib.sha256(b"\x01" + left + right).digest()


def _tree_hash(leaves):
    """RFC 6962 section 2.1's Merkle Tree Hash, by its recursive definition."""
    if len(leaves) == 1:
        return leaves[0]
    split = 1 << ((len(leaves) - 1).bit_length() - 1)
    return _node(_tree_hash(leaves[:split]), _tree_hash(leaves[split:]))


def _path(index, leaves):
    """RFC 6962 section 2.1.1's audit path, by its recursive definition."""
    if len(leaves) == 1:
        return []
    split = 1 << ((len(leaves) - 1).bit_length() - 1)
    if index < split:
        return _path(index, leaves[:split]) + [_tree_hash(leaves[split:])]
    return _path(index - split, leaves[split:]) + [_tree_hash(leaves[:split])]


class RoundSignatures(unittest.TestCase):
    """Triggers signed as a round: written here from the RFCs' own definitions, the way the
    scheduler signs them, and checked by the executor's verification."""

    topic = "k.triggers.a"

    def setUp(self):
        self.private = Ed25519PrivateKey.generate()
        raw = self.private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.key_id = key_id(raw)
        self.trusted = TrustedKeys([base64.b64encode(raw).decode()])
        # Seven triggers over three partitions.
        self.records = [(self.topic, i % 3, f"trigger {i}".encode()) for i in range(7)]

    def sign(self, records, private=None):
        leaves = [leaf_hash(*record) for record in records]
        root = _tree_hash(leaves)
        size = len(leaves).to_bytes(8, "big")
        signature = (private or self.private).sign(b"kadence-trigger-round-v1\n" + size + root)
        signer = private.public_key() if private else self.private.public_key()
        signer_id = key_id(signer.public_bytes(Encoding.Raw, PublicFormat.Raw))
        return [
            [
                (SIGNATURE_KEY, signer_id.encode()),
                (ROUND_SIGNATURE, size + root + signature),
                (ROUND_PROOF, index.to_bytes(8, "big") + b"".join(_path(index, leaves))),
            ]
            for index in range(len(leaves))
        ]

    def refusal(self, record, headers):
        topic, partition, value = record
        with self.assertRaises(VerifyError) as raised:
            self.trusted.verify(topic, partition, value, headers)
        return raised.exception.kind, str(raised.exception)

    @staticmethod
    def replaced(headers, name, value):
        return [(key, value if key == name else old) for key, old in headers if
                key != name or value is not None]

    def test_each_record_verifies_alone_and_in_any_order(self):
        signed = self.sign(self.records)
        for record, headers in reversed(list(zip(self.records, signed))):
            topic, partition, value = record
            fresh = TrustedKeys([base64.b64encode(self.private.public_key().public_bytes(
                Encoding.Raw, PublicFormat.Raw)).decode()])
            self.assertEqual(fresh.verify(topic, partition, value, headers), self.key_id)
            self.assertEqual(self.trusted.verify(topic, partition, value, headers), self.key_id)
        lone = self.sign(self.records[:1])[0]
        self.assertEqual(len(dict(lone)[ROUND_PROOF]), 8)
        self.assertEqual(self.trusted.verify(*self.records[0], lone), self.key_id)

    def test_a_record_changed_moved_or_given_another_proof_is_refused(self):
        signed = self.sign(self.records)
        topic, partition, value = self.records[4]
        for record, headers in [
            ((topic, 0, value), signed[4]),
            (("k.triggers.b", partition, value), signed[4]),
            ((topic, partition, b"changed"), signed[4]),
            ((topic, partition, value), signed[5]),
        ]:
            kind, message = self.refusal(record, headers)
            self.assertEqual(kind, "bad_proof")
            self.assertTrue(message.startswith(f"bad round proof by key {self.key_id}"), message)
        proof = bytearray(dict(signed[4])[ROUND_PROOF])
        proof[20] ^= 1
        tampered = self.replaced(signed[4], ROUND_PROOF, bytes(proof))
        self.assertEqual(self.refusal(self.records[4], tampered)[0], "bad_proof")

    def test_a_round_by_another_key_or_with_its_signature_changed_is_refused(self):
        retired = Ed25519PrivateKey.generate()
        kind, _ = self.refusal(self.records[2], self.sign(self.records, retired)[2])
        self.assertEqual(kind, "unknown_key")
        signed = self.sign(self.records)
        self.assertEqual(self.trusted.verify(*self.records[2], signed[2]), self.key_id)
        forged = bytearray(dict(signed[2])[ROUND_SIGNATURE])
        forged[-1] ^= 1
        kind, _ = self.refusal(self.records[2], self.replaced(signed[2], ROUND_SIGNATURE, bytes(forged)))
        self.assertEqual(kind, "bad_signature")

    def test_malformed_round_headers_say_which_and_why(self):
        headers = self.sign(self.records)[1]
        cases = [
            (ROUND_SIGNATURE, b"short",
             "malformed signature header kadence.signature.round: 5 bytes instead of 104"),
            (ROUND_PROOF, None,
             "malformed signature header kadence.signature.proof: missing while "
             "kadence.signature.round is there"),
            (ROUND_PROOF, bytes(9),
             "malformed signature header kadence.signature.proof: 9 bytes, not an 8-byte index "
             "and 32-byte hashes"),
            (SIGNATURE_KEY, None,
             "malformed signature header kadence.signature.key: missing while the other "
             "signature header is there"),
        ]
        for name, value, expected in cases:
            kind, message = self.refusal(self.records[1], self.replaced(headers, name, value))
            self.assertEqual((kind, message), ("malformed_signature", expected))
