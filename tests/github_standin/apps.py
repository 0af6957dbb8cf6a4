"""GitHub Apps as GitHub knows them: each App's public keys, and the check of an App JWT.

Owns the App registry (app id -> the public keys GitHub holds for it, in the order they were
added) and :func:`AppRegistry.verify`, which judges a ``Bearer`` App JWT as GitHub does and
answers with GitHub's own words. Nothing here knows HTTP; refusals of the control API are
:class:`.model.StandinError`.

GitHub's rules, as documented ("Generating a JSON Web Token (JWT) for a GitHub App" and
"Managing private keys for GitHub Apps", github/docs): the JWT is signed ``RS256``; ``iss`` is
the App's id, used to find the App's public keys; ``iat`` is the time it was made (clients are
told to backdate it by 60 s against clock drift, so a future ``iat`` is refused); ``exp`` is
no more than 10 minutes into the future. An App has up to 25 keys, any of which signs, and its
only key cannot be deleted before a new one exists. A key is known by its SHA-256 fingerprint
(base64 of the SHA-256 of the public key's DER ``SubjectPublicKeyInfo``).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import threading
import time
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from .model import AppJwtCheck, BadRequestError, ConflictError, NotFoundError

MAX_KEYS = 25
MAX_LIFETIME = 600  # seconds an App JWT's exp may lie ahead of GitHub's clock

# GitHub's answers (401, REST error body), verbatim as clients have reported them:
# - a JWT that does not parse, is not RS256, names an unknown App, or whose signature no key of
#   the App verifies (octokit/auth-app.js#375 and actions/create-github-app-token#153 reproduce
#   it with a valid key and another App's id; octokit/request.js#505):
DECODE_FAILED = "A JSON web token could not be decoded"
# - exp more than 10 minutes ahead (rocq-prover/bot#204 quotes the whole JSON body;
#   probot/probot#942, octokit/auth-app.js#698):
EXP_TOO_FAR = "'Expiration time' claim ('exp') is too far in the future"
# - exp absent, not an integer, or already past (sigmavirus24/github3.py#1050):
EXP_INVALID = (
    "'Expiration time' claim ('exp') must be a numeric value representing the future time at "
    "which the assertion expires"
)
# - iat absent, not an integer, or ahead of GitHub's clock (probot/probot#967; github/docs#4156
#   explains the clock-drift cause):
IAT_INVALID = (
    "'Issued at' claim ('iat') must be an Integer representing the time that the assertion "
    "was issued"
)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64url_decode(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


# Cached: GARM signs a JWT with the same App key at each of its calls, and loading a private
# key checks it (RSA arithmetic), a few ms of the stand-in's CPU every time.
@functools.lru_cache(maxsize=64)
def public_key_of(pem: str) -> rsa.RSAPublicKey:
    """Return the RSA public key of a PEM private key (PKCS#1 or PKCS#8) or public key."""
    data = pem.encode("ascii")
    try:
        if b"PRIVATE KEY-----" in data:
            key: Any = serialization.load_pem_private_key(data, password=None).public_key()
        else:
            key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise BadRequestError("the App key is not a PEM RSA private or public key") from exc
    if not isinstance(key, rsa.RSAPublicKey):
        raise BadRequestError("a GitHub App key is an RSA key")
    return key


def key_fingerprint(pem: str) -> str:
    """GitHub's fingerprint of an App key (from its private or public PEM): ``SHA256:<base64>``.

    The same as ``openssl rsa -in KEY.pem -pubout -outform DER | openssl sha256 -binary |
    openssl base64``, the check GitHub's documentation gives.
    """
    return _fingerprint(public_key_of(pem))


def _fingerprint(key: rsa.RSAPublicKey) -> str:
    der = key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return "SHA256:" + base64.b64encode(hashlib.sha256(der).digest()).decode("ascii")


def app_key(app_id: int | str) -> str:
    """The registry's key for an App id: its decimal text (``iss`` may be a string or a number)."""
    text = str(app_id).strip()
    if not text.isdigit():
        raise BadRequestError(f"a GitHub App id is a positive integer, not {app_id!r}")
    return str(int(text))


@dataclass(frozen=True)
class _Key:
    fingerprint: str
    public: rsa.RSAPublicKey


@dataclass(frozen=True)
class _Parsed:
    header: dict[str, Any]
    claims: dict[str, Any]
    signing_input: bytes
    signature: bytes


def _parse(authorization: str | None) -> _Parsed | None:
    """Split a ``Bearer <JWT>`` value into its decoded parts, or None if it is not one."""
    scheme, _, token = (authorization or "").partition(" ")
    parts = token.strip().split(".")
    if scheme.lower() != "bearer" or len(parts) != 3 or not all(parts):
        return None
    try:
        header = json.loads(_b64url_decode(parts[0]))
        claims = json.loads(_b64url_decode(parts[1]))
        signature = _b64url_decode(parts[2])
    except (ValueError, binascii.Error):
        return None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        return None
    signing_input = f"{parts[0]}.{parts[1]}".encode("ascii")
    return _Parsed(header, claims, signing_input, signature)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _time_refusal(claims: dict[str, Any], now: float) -> str | None:
    """GitHub's refusal of the JWT's ``iat``/``exp``, or None when both are acceptable."""
    iat, exp = claims.get("iat"), claims.get("exp")
    if not _is_int(iat) or iat > now:
        return IAT_INVALID
    if not _is_int(exp) or exp <= now:
        return EXP_INVALID
    if exp - now > MAX_LIFETIME:
        return EXP_TOO_FAR
    return None


class AppRegistry:
    """The GitHub Apps the stand-in knows and their public keys (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._apps: dict[str, list[_Key]] = {}

    def add_key(self, app_id: int | str, pem: str) -> str:
        """Give App ``app_id`` (created on first use) one more key; return its fingerprint.

        ``pem`` is the private key as GitHub hands it out (only its public half is kept) or
        a public key. Adding a key the App already has changes nothing.
        """
        public = public_key_of(pem)
        fingerprint = _fingerprint(public)
        with self._lock:
            keys = self._apps.setdefault(app_key(app_id), [])
            if any(k.fingerprint == fingerprint for k in keys):
                return fingerprint
            if len(keys) >= MAX_KEYS:
                raise BadRequestError(
                    f"App {app_id} already has {MAX_KEYS} private keys; delete one first"
                )
            keys.append(_Key(fingerprint, public))
        return fingerprint

    def revoke_key(self, app_id: int | str, key: str) -> None:
        """Delete one key of an App, named by its fingerprint or its (private or public) PEM.

        GitHub refuses to delete an App's only key: a new one must be generated first.
        """
        fingerprint = key if key.startswith("SHA256:") else key_fingerprint(key)
        with self._lock:
            keys = self._apps.get(app_key(app_id), [])
            kept = [k for k in keys if k.fingerprint != fingerprint]
            if len(kept) == len(keys):
                raise NotFoundError(f"App {app_id} has no key {fingerprint}")
            if not kept:
                raise ConflictError(
                    f"App {app_id} has only key {fingerprint}: generate a new key before "
                    "deleting it"
                )
            keys[:] = kept

    def keys(self, app_id: int | str) -> list[str]:
        """Fingerprints of an App's keys, oldest first (empty for an unknown App)."""
        with self._lock:
            return [k.fingerprint for k in self._apps.get(app_key(app_id), [])]

    def verify(self, authorization: str | None, now: float | None = None) -> AppJwtCheck:
        """Judge an ``Authorization`` value as GitHub judges an App JWT; never raises.

        The check names the key that verified the signature and, when GitHub would refuse
        the JWT, GitHub's message.
        """
        at = time.time() if now is None else now
        parsed = _parse(authorization)
        if parsed is None:
            return AppJwtCheck({}, {}, None, DECODE_FAILED, at)
        key = self._signing_key(parsed)
        if key is None:
            return AppJwtCheck(parsed.header, parsed.claims, None, DECODE_FAILED, at)
        refusal = _time_refusal(parsed.claims, at)
        return AppJwtCheck(parsed.header, parsed.claims, key.fingerprint, refusal, at)

    def _signing_key(self, parsed: _Parsed) -> _Key | None:
        """The App key whose RS256 signature the JWT carries, or None."""
        if parsed.header.get("alg") != "RS256":
            return None
        issuer = parsed.claims.get("iss")
        if not (_is_int(issuer) or isinstance(issuer, str)):
            return None
        with self._lock:
            keys = list(self._apps.get(str(issuer), []))
        for key in keys:
            try:
                key.public.verify(
                    parsed.signature, parsed.signing_input, padding.PKCS1v15(), hashes.SHA256()
                )
            except InvalidSignature:
                continue
            return key
        return None


def sign_app_jwt(private_pem: str, claims: dict[str, Any], alg: str = "RS256") -> str:
    """Sign ``claims`` with an App's private key as a GitHub App client does (RS256).

    For tests that play the App; ``alg`` only changes the header (the signature stays RS256).
    """
    key = serialization.load_pem_private_key(private_pem.encode("ascii"), password=None)
    if not isinstance(key, rsa.RSAPrivateKey):
        raise TypeError("a GitHub App key is an RSA key")
    header = {"alg": alg, "typ": "JWT"}
    segments = [_b64url(json.dumps(part).encode()) for part in (header, claims)]
    signing_input = ".".join(segments).encode("ascii")
    signature = key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input.decode('ascii')}.{_b64url(signature)}"
