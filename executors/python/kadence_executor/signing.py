"""Signed records (PROTOCOL.md section 3), both ways.

From the scheduler: it signs every trigger and control record with Ed25519; an executor that
trusts its public key (``TrustedKeys``) verifies each one before decoding it, so a record
someone else wrote to the topic never runs. The signature covers
``kadence-trigger-v1\\n{topic}\\n{value}``; the headers ``kadence.signature.key`` (key id: the
first 8 bytes of the SHA-256 of the 32-byte public key, 16 hex digits) and
``kadence.signature`` (base64, standard, padded) carry it.

A trigger may instead be signed with the rest of its dispatch round: the scheduler signs the
Merkle root (RFC 6962, SHA-256) of the round's records once, and each record carries that
signature in ``kadence.signature.round`` (104 bytes: the round's size as a big-endian u64, its
root, the Ed25519 signature over ``kadence-trigger-round-v1\n{size}{root}``) and its own
inclusion proof in ``kadence.signature.proof`` (its index as a big-endian u64, then the
RFC 9162 path, 32 bytes a hash). A leaf is the record where it was produced:
``SHA-256(0x00 || kadence-trigger-leaf-v1\n{topic}\n{partition}\n{value})``. The proof is
checked for every record, the round's signature once (``TrustedKeys`` remembers the rounds it
checked).

To the scheduler: every record the executor writes (results, shadow results, log records,
beats, dead letters) is signed with its app's *executor key* (``ExecutorKey``), so that nobody
else who can write ``{prefix}.results`` completes runs, or steers routing through
``{prefix}.beats``. The key is the text ``{key id}.{secret}`` that
``kadence executor-key create --app APP`` shows once: 16 lowercase hex digits, a dot, and the
unpadded base64url of 32 secret bytes. The signature is the HMAC-SHA256 of
``kadence-executor-v1\\n{topic}\\n{value}`` under the secret bytes, base64 (standard, padded),
in ``kadence.executor.signature`` beside the key id in ``kadence.executor.key``. Decisions:

- The key text is stripped of surrounding whitespace (one read from a file ends with a newline;
  the trusted keys are read the same way), and otherwise taken only exactly as the scheduler
  shows it: a secret whose last character carries bits that are not zero decodes to the same
  32 bytes but is not a text the scheduler makes, so it is refused like any other typo.
- A record without a value (a dead-lettered trigger that had none) is signed over an empty
  value, as the trigger verification reads one.
- Messages about a refused key text never show the secret, nor anything before a key id is
  known to be one: a text with its parts swapped or its dot missing would show the secret.
"""

import base64
import binascii
import hashlib
import hmac
import re

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

SIGNATURE_KEY = "kadence.signature.key"
SIGNATURE = "kadence.signature"
ROUND_SIGNATURE = "kadence.signature.round"
ROUND_PROOF = "kadence.signature.proof"
#: The feature every beat lists (PROTOCOL.md section 9): ``TrustedKeys.verify`` takes round-signed
#: triggers as well as those signed one by one, and the scheduler signs an app's triggers by the
#: round only while all its executors list this, since older ones dead-letter them as unsigned.
ROUND_SIGNATURES_FEATURE = "round-signatures"
EXECUTOR_KEY = "kadence.executor.key"
EXECUTOR_SIGNATURE = "kadence.executor.signature"
_DOMAIN = b"kadence-trigger-v1\n"
_EXECUTOR_DOMAIN = b"kadence-executor-v1\n"
_ROUND_DOMAIN = b"kadence-trigger-round-v1\n"
_LEAF_DOMAIN = b"kadence-trigger-leaf-v1\n"
_ROUND_SIGNATURE_LENGTH = 104
_HASH_LENGTH = 32
_VERIFIED_ROUNDS_LIMIT = 4096
_KEY_ID = re.compile(r"[0-9a-f]{16}")
_SECRET_CHARS = re.compile(r"[A-Za-z0-9_-]*")
_SECRET_LENGTH = 43  # 32 bytes, base64url without padding


class VerifyError(Exception):
    """A record refused by verification; ``kind`` is a short label (metrics, tests)."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


def key_id(public_key_bytes):
    """The id of a 32-byte public key."""
    return hashlib.sha256(public_key_bytes).digest()[:8].hex()


def signed_message(topic, value):
    """The bytes a record's signature covers."""
    return _DOMAIN + topic.encode() + b"\n" + value


def leaf_hash(topic, partition, value):
    """The Merkle leaf of a round-signed record: where it was produced and its value."""
    record = _LEAF_DOMAIN + topic.encode() + b"\n" + str(partition).encode() + b"\n" + value
    return hashlib.sha256(b"\x00" + record).digest()


def _node_hash(left, right):
    return hashlib.sha256(b"\x01" + left + right).digest()


def root_from_proof(leaf, index, size, path):
    """The root the inclusion proof `path` (a list of 32-byte hashes) leads to from `leaf` at
    `index` of a tree of `size` leaves, RFC 9162 section 2.1.3.2; None when it leads nowhere
    (an index out of range, a path too long or too short)."""
    if index >= size:
        return None
    fn, sn, hashed = index, size - 1, leaf
    for sibling in path:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            hashed = _node_hash(sibling, hashed)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            hashed = _node_hash(hashed, sibling)
        fn >>= 1
        sn >>= 1
    return hashed if sn == 0 else None


class TrustedKeys:
    """The scheduler keys whose signatures an executor accepts (several during a rotation)."""

    def __init__(self, base64_keys=()):
        self._keys = {}
        # Round signatures checked already, by key id and header: a round's other records
        # need only their proofs. Started again empty when full (at most one more check per
        # round still arriving).
        self._verified_rounds = set()
        for text in base64_keys:
            try:
                raw = base64.b64decode(text.strip(), validate=True)
                key = Ed25519PublicKey.from_public_bytes(raw)
            except (binascii.Error, ValueError) as error:
                raise ValueError(
                    f"trusted key {text!r} is not the base64 of an Ed25519 public key: {error}"
                ) from error
            self._keys[key_id(raw)] = key

    def __bool__(self):
        return bool(self._keys)

    def key_ids(self):
        return sorted(self._keys)

    def verify(self, topic, partition, value, headers):
        """Returns the id of the trusted key that signed `value` on `topic` (and, for a
        round-signed record, `partition`), or raises VerifyError. `headers` is the record's
        list of (name, bytes); the last one of a name wins, as Kafka's ``lastHeader`` reads
        them. A record with a ``kadence.signature.round`` header is checked as round-signed."""
        found = {}
        for name, header_value in headers or ():
            found[name] = header_value or b""
        if ROUND_SIGNATURE in found:
            return self._verify_round(topic, partition, value or b"", found)
        signer, signature = found.get(SIGNATURE_KEY), found.get(SIGNATURE)
        if signer is None and signature is None:
            raise VerifyError(
                "unsigned",
                "unsigned record: it has no kadence.signature headers, and this executor runs "
                "only records signed by a trusted scheduler key",
            )
        for name, present in ((SIGNATURE, signature), (SIGNATURE_KEY, signer)):
            if present is None:
                raise _malformed(name, "missing while the other signature header is there")
        signer, key = self._trusted(signer)
        try:
            raw = base64.b64decode(signature, validate=True)
        except binascii.Error as error:
            raise _malformed(SIGNATURE, f"not base64: {error}") from None
        if len(raw) != 64:
            raise _malformed(SIGNATURE, f"{len(raw)} bytes instead of 64")
        try:
            key.verify(raw, signed_message(topic, value or b""))
        except InvalidSignature:
            raise _bad_signature(signer) from None
        return signer

    def _trusted(self, signer):
        """The key id in the header's bytes `signer`, and the trusted key it names."""
        try:
            signer = signer.decode()
        except UnicodeDecodeError:
            raise _malformed(SIGNATURE_KEY, "not UTF-8 text") from None
        key = self._keys.get(signer)
        if key is None:
            printable = "".join(c if c.isprintable() else "?" for c in signer[:64])
            raise VerifyError(
                "unknown_key",
                f"signed by unknown key {printable}: not one of this executor's trusted keys "
                "(forged, or signed by a newer scheduler key: add its public key from "
                "`kadence key list`)",
            )
        return signer, key

    def _verify_round(self, topic, partition, value, found):
        """A round-signed record, checked in the protocol's order: the key id, the two
        headers' shapes, the proof, the round's signature (once per round)."""
        signer = found.get(SIGNATURE_KEY)
        if signer is None:
            raise _malformed(SIGNATURE_KEY, "missing while the other signature header is there")
        signer, key = self._trusted(signer)
        round_signature = bytes(found[ROUND_SIGNATURE])
        if len(round_signature) != _ROUND_SIGNATURE_LENGTH:
            raise _malformed(
                ROUND_SIGNATURE,
                f"{len(round_signature)} bytes instead of {_ROUND_SIGNATURE_LENGTH}",
            )
        proof = found.get(ROUND_PROOF)
        if proof is None:
            raise _malformed(ROUND_PROOF, f"missing while {ROUND_SIGNATURE} is there")
        if len(proof) < 8 or (len(proof) - 8) % _HASH_LENGTH:
            raise _malformed(
                ROUND_PROOF, f"{len(proof)} bytes, not an 8-byte index and 32-byte hashes"
            )
        size = int.from_bytes(round_signature[:8], "big")
        path = [proof[at : at + _HASH_LENGTH] for at in range(8, len(proof), _HASH_LENGTH)]
        root = root_from_proof(
            leaf_hash(topic, partition, value), int.from_bytes(proof[:8], "big"), size, path
        )
        if root is None or not hmac.compare_digest(root, round_signature[8:40]):
            raise VerifyError(
                "bad_proof",
                f"bad round proof by key {signer}: the record was changed after signing, moved "
                "to another topic or partition, or forged",
            )
        remembered = (signer, round_signature)
        if remembered not in self._verified_rounds:
            try:
                key.verify(round_signature[40:], _ROUND_DOMAIN + round_signature[:40])
            except InvalidSignature:
                raise _bad_signature(signer) from None
            if len(self._verified_rounds) >= _VERIFIED_ROUNDS_LIMIT:
                self._verified_rounds.clear()
            self._verified_rounds.add(remembered)
        return signer


def _bad_signature(signer):
    return VerifyError(
        "bad_signature",
        f"bad signature by key {signer}: the record was changed after signing, copied from "
        "another topic, or forged",
    )


def _malformed(header, reason):
    return VerifyError("malformed_signature", f"malformed signature header {header}: {reason}")


class ExecutorKey:
    """An app's executor key: signs what the executor writes. Its ``repr`` shows the key id
    only, so settings can be printed and logged."""

    def __init__(self, text):
        """Parses ``{key id}.{secret}``; a ValueError names what is wrong without the secret."""
        key_id_text, dot, secret = text.strip().partition(".")
        if not dot:
            raise _bad_key("it has no dot")
        if len(key_id_text) != 16:
            raise _bad_key(f"its key id (before the dot) is {len(key_id_text)} characters, not 16")
        if not _KEY_ID.fullmatch(key_id_text):
            raise _bad_key("its key id (before the dot) is not all lowercase hex digits (0-9 a-f)")
        self.key_id = key_id_text
        self._secret = _decode_secret(key_id_text, secret)

    def __repr__(self):
        return f"ExecutorKey({self.key_id})"

    def sign(self, topic, value):
        """The ``kadence.executor.signature`` of `value` (bytes, or None: empty) on `topic`."""
        message = _EXECUTOR_DOMAIN + topic.encode() + b"\n" + (value or b"")
        return base64.b64encode(hmac.new(self._secret, message, hashlib.sha256).digest())

    def headers(self, topic, value):
        """The two headers that sign `value` on `topic`."""
        return [(EXECUTOR_KEY, self.key_id.encode()), (EXECUTOR_SIGNATURE, self.sign(topic, value))]


def _decode_secret(key_id_text, secret):
    def bad(reason):
        return _bad_key(f"the secret of key {key_id_text} {reason}")

    if not _SECRET_CHARS.fullmatch(secret):
        raise bad("has characters outside unpadded base64url (A-Z a-z 0-9 - _)")
    try:
        raw = base64.urlsafe_b64decode(secret + "=" * (-len(secret) % 4))
    except binascii.Error:
        raise bad(f"is {len(secret)} characters, not {_SECRET_LENGTH}") from None
    if len(raw) != 32:
        raise bad(f"decodes to {len(raw)} bytes instead of 32 ({_SECRET_LENGTH} characters)")
    if base64.urlsafe_b64encode(raw).rstrip(b"=").decode() != secret:
        raise bad("is not as the scheduler writes it: its last character is not canonical")
    return raw


def _bad_key(reason):
    return ValueError(
        f"executor key is not {{key id}}.{{secret}} as `kadence executor-key create --app APP` "
        f"shows it: {reason}"
    )
