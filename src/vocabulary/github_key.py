"""The GitHub App private key: its form (PKCS#1 PEM, the only one GARM takes) and its identity.

Owns the one check of a key's form, which the configurator parser runs before a credential is
published, so that a key GARM would refuse (or fail on) is reported as the configurator's bad
input; and the digest of the public key a private key holds, which tells whether two
configurators hold the same App key without keeping or comparing the keys themselves. Pure:
must not import ops, the GARM client or other charm modules; never quotes a key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib

PKCS1_HEADER = "-----BEGIN RSA PRIVATE KEY-----"
PKCS1_FOOTER = "-----END RSA PRIVATE KEY-----"
PKCS8_HEADER = "-----BEGIN PRIVATE KEY-----"


def pkcs1_key_problem(key: str) -> str:
    """Tell what is wrong with a GitHub App key for GARM, without ever quoting it.

    GARM takes only an RSA key in PKCS#1 PEM, the form GitHub hands out: a PKCS#8 key makes it
    fail with a server error, anything else is refused. The charm does not convert keys.

    Args:
        key: the private key text.

    Returns:
        ``""`` when the key is PKCS#1 PEM with a DER sequence inside, else the reason.
    """
    text = key.strip()
    if text.startswith(PKCS8_HEADER):
        return (
            "GitHub private key is PKCS#8 (BEGIN PRIVATE KEY); GARM needs PKCS#1 "
            "(BEGIN RSA PRIVATE KEY), e.g. from openssl rsa -traditional"
        )
    if not (text.startswith(PKCS1_HEADER) and text.endswith(PKCS1_FOOTER)):
        return "GitHub private key is not a PEM RSA private key"
    der = _der(text)
    # A DER-encoded RSAPrivateKey is a SEQUENCE.
    if der is None or len(der) < 64 or der[0] != 0x30:
        return "GitHub private key is not valid PEM"
    return ""


def app_key_problem(key: str) -> str:
    """What is wrong with a GitHub App key as published (empty, not PKCS#1); "" when nothing."""
    if not key.strip():
        return "GitHub private key is empty"
    return pkcs1_key_problem(key)


def public_key_digest(key: str) -> str:
    """Return a digest of the RSA public key (modulus and exponent) a PKCS#1 private key holds.

    The same key in another PEM layout (line length, spacing) gives the same digest; another
    key gives another. A key this module cannot read gives a digest of its text, so that it
    equals only itself.

    Args:
        key: the private key text.

    Returns:
        A SHA-256 hex digest.
    """
    text = key.strip()
    public = _rsa_public_numbers(_der(text)) if text.startswith(PKCS1_HEADER) else None
    material = f"rsa:{public[0]:x}:{public[1]:x}" if public else f"text:{text}"
    return hashlib.sha256(material.encode("utf-8", "replace")).hexdigest()


def _der(text: str) -> bytes | None:
    body = "".join(text[len(PKCS1_HEADER) : -len(PKCS1_FOOTER)].split())
    try:
        return base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        return None


def _rsa_public_numbers(der: bytes | None) -> tuple[int, int] | None:
    """(modulus, public exponent) of a DER RSAPrivateKey: SEQUENCE {version, n, e, ...}."""
    if der is None:
        return None
    sequence = _tlv(der, 0, 0x30)
    if sequence is None:
        return None
    start, _ = sequence
    numbers: list[int] = []
    for _ in range(3):
        element = _tlv(der, start, 0x02)
        if element is None:
            return None
        value_start, end = element
        numbers.append(int.from_bytes(der[value_start:end], "big"))
        start = end
    _, modulus, exponent = numbers
    return modulus, exponent


def _tlv(der: bytes, offset: int, tag: int) -> tuple[int, int] | None:
    """The value's (start, end) of the DER element of ``tag`` at ``offset``, else None."""
    if offset + 2 > len(der) or der[offset] != tag:
        return None
    length, start = der[offset + 1], offset + 2
    if length & 0x80:
        size = length & 0x7F
        if size == 0 or size > 4 or start + size > len(der):
            return None
        length, start = int.from_bytes(der[start : start + size], "big"), start + size
    end = start + length
    return (start, end) if end <= len(der) else None
