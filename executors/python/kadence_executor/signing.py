"""Signed records (PROTOCOL.md section 3), both ways.

From the scheduler: it signs every trigger and control record with Ed25519; an executor that
trusts its public key (``TrustedKeys``) verifies each one before decoding it, so a record
someone else wrote to the topic never runs. The signature covers
``kadence-trigger-v1\\n{topic}\\n{value}``; the headers ``kadence.signature.key`` (key id: the
first 8 bytes of the SHA-256 of the 32-byte public key, 16 hex digits) and
``kadence.signature`` (base64, standard, padded) carry it.

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
EXECUTOR_KEY = "kadence.executor.key"
EXECUTOR_SIGNATURE = "kadence.executor.signature"
_DOMAIN = b"kadence-trigger-v1\n"
_EXECUTOR_DOMAIN = b"kadence-executor-v1\n"
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


class TrustedKeys:
    """The scheduler keys whose signatures an executor accepts (several during a rotation)."""

    def __init__(self, base64_keys=()):
        self._keys = {}
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

    def verify(self, topic, value, headers):
        """Returns the id of the trusted key that signed `value` on `topic`, or raises
        VerifyError. `headers` is the record's list of (name, bytes); the last one of a name
        wins, as Kafka's ``lastHeader`` reads them."""
        found = {}
        for name, header_value in headers or ():
            found[name] = header_value or b""
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
        try:
            raw = base64.b64decode(signature, validate=True)
        except binascii.Error as error:
            raise _malformed(SIGNATURE, f"not base64: {error}") from None
        if len(raw) != 64:
            raise _malformed(SIGNATURE, f"{len(raw)} bytes instead of 64")
        try:
            key.verify(raw, signed_message(topic, value or b""))
        except InvalidSignature:
            raise VerifyError(
                "bad_signature",
                f"bad signature by key {signer}: the record was changed after signing, copied "
                "from another topic, or forged",
            ) from None
        return signer


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
