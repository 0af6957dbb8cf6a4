"""Real RSA keys for tests: GARM refuses a GitHub App key that does not parse.

GARM accepts only an RSA key in PKCS#1 PEM (``BEGIN RSA PRIVATE KEY``, the form GitHub hands out
for an App); a PKCS#8 key (``BEGIN PRIVATE KEY``) makes it answer 500. Keys are generated at test
time, never committed, once per process (2048-bit generation takes a noticeable fraction of a
second).
"""

from __future__ import annotations

import base64
import functools
import textwrap

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.log_secrets import register_secret


@functools.cache
def _key(index: int) -> rsa.RSAPrivateKey:
    del index  # one key per index, generated once
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@functools.cache
def pkcs1_pem(index: int = 0) -> str:
    """A PKCS#1 PEM RSA private key (2048 bits); the same text for the same ``index``.

    The value (and its base64, what GARM is sent) is registered as a secret, so a test that
    logs it fails.
    """
    pem = (
        _key(index)
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
        .decode("ascii")
    )
    register_secret(pem, base64.b64encode(pem.encode("ascii")).decode("ascii"))
    return pem


@functools.cache
def pkcs8_pem(index: int = 0) -> str:
    """The key of :func:`pkcs1_pem` ``(index)`` in PKCS#8 PEM (``BEGIN PRIVATE KEY``)."""
    pem = (
        _key(index)
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        .decode("ascii")
    )
    register_secret(pem)
    return pem


def rewrapped(pem: str, width: int = 76) -> str:
    """The same PEM key with its body in lines of ``width`` characters (another layout)."""
    lines = pem.strip().splitlines()
    body = "".join(lines[1:-1])
    wrapped = "\n".join([lines[0], *textwrap.wrap(body, width), lines[-1], ""])
    register_secret(wrapped)
    return wrapped
