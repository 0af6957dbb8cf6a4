"""Tokens and timestamps as the stand-in hands them out and reads them.

Owns the look of credentials: JWT-shaped strings (unsigned; GARM only reads their ``exp``
claim), opaque tokens with GitHub's prefixes, the check that an ``Authorization`` value is a
JWT-shaped Bearer token, and RFC 3339 timestamps.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
import time
from datetime import UTC, datetime
from typing import Any

# A signature segment that is plainly not a signature: nothing here is ever verified.
_UNSIGNED = base64.urlsafe_b64encode(b"github-standin-unsigned").rstrip(b"=").decode()


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _b64url_decode(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def make_jwt(claims: dict[str, Any]) -> str:
    """Return an unsigned JWT-shaped token carrying ``claims``."""
    header = _b64url(json.dumps({"alg": "RS256", "typ": "JWT"}).encode())
    payload = _b64url(json.dumps(claims, sort_keys=True).encode())
    return f"{header}.{payload}.{_UNSIGNED}"


def jwt_claims(token: str) -> dict[str, Any] | None:
    """Return the claims of a JWT-shaped token, or None when it is not shaped like a JWT.

    JWT-shaped means three dot-separated base64url segments whose first two decode to JSON
    objects. The signature is not checked.
    """
    parts = token.split(".")
    if len(parts) != 3 or not all(parts):
        return None
    try:
        header = json.loads(_b64url_decode(parts[0]))
        claims = json.loads(_b64url_decode(parts[1]))
    except (ValueError, binascii.Error):
        return None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        return None
    return claims


def bearer_jwt_claims(authorization: str | None) -> dict[str, Any] | None:
    """Return the claims of a ``Bearer <JWT>`` header value, or None if it is not one."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return jwt_claims(token.strip())


def credential(authorization: str | None, scheme: str) -> str | None:
    """Return the credential of an ``Authorization`` value using ``scheme``, else None."""
    given, _, value = (authorization or "").partition(" ")
    if given.lower() != scheme.lower() or not value.strip():
        return None
    return value.strip()


def opaque_token(prefix: str) -> str:
    """Return a random opaque token, e.g. ``ghs_...`` for an installation token."""
    return prefix + secrets.token_urlsafe(27)


def timed_jwt(lifetime: float, **claims: Any) -> tuple[str, float]:
    """Return a JWT-shaped token expiring ``lifetime`` seconds from now, and that expiry."""
    now = time.time()
    expiry = now + lifetime
    body = {
        "iat": int(now),
        "nbf": int(now),
        "exp": int(expiry),
        "jti": secrets.token_hex(8),  # two tokens minted in one second still differ
        **claims,
    }
    return make_jwt(body), expiry


def rfc3339(epoch: float) -> str:
    """Return ``epoch`` as an RFC 3339 UTC timestamp with a ``Z`` suffix."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
