"""The GitHub App private key check: GARM takes an RSA key in PKCS#1 PEM and nothing else.

Owns the one check of a key's form, which the configurator parser runs before a credential is
published, so that a key GARM would refuse (or fail on) is reported as the configurator's bad
input. Pure: must not import ops, the GARM client or other charm modules; never quotes a key.
"""

from __future__ import annotations

import base64
import binascii

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
    body = "".join(text[len(PKCS1_HEADER) : -len(PKCS1_FOOTER)].split())
    try:
        der = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        return "GitHub private key is not valid PEM"
    # A DER-encoded RSAPrivateKey is a SEQUENCE.
    if len(der) < 64 or der[0] != 0x30:
        return "GitHub private key is not valid PEM"
    return ""
