"""Signed records (PROTOCOL.md section 3): the scheduler signs every trigger and control
record with Ed25519; an executor that trusts its public key verifies each one before decoding
it, so a record someone else wrote to the topic never runs.

The signature covers ``kadence-trigger-v1\\n{topic}\\n{value}``; the headers
``kadence.signature.key`` (key id: the first 8 bytes of the SHA-256 of the 32-byte public key,
16 hex digits) and ``kadence.signature`` (base64, standard, padded) carry it.
"""

import base64
import binascii
import hashlib

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

SIGNATURE_KEY = "kadence.signature.key"
SIGNATURE = "kadence.signature"
_DOMAIN = b"kadence-trigger-v1\n"


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
