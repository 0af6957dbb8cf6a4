"""GARM's GitHub endpoints: github.com from the start, GitHub Enterprise Servers added by API.

As GARM v0.2.1-afda4e76 keeps them (``runner/github_endpoints.go``, ``database/sql/github.go``,
measured in ``tests/conformance/test_endpoints.py``): names unique without regard to case; a CA
bundle re-encoded without duplicates before it is stored (text holding no PEM block becomes no
bundle at all), then only its first block validated; no rename and no way to clear a bundle; the
URLs of an endpoint with credentials fixed; an endpoint with credentials or entities never
deleted, an unknown one deleted without complaint. The caller (``GarmState``) holds the lock
and says which endpoints credentials and entities use.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from cryptography import x509

from .wire import to_wire

DEFAULT_ENDPOINT = "github.com"
URL_FIELDS = ("api_base_url", "upload_base_url", "base_url")
_PEM = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----\r?\n(.*?)-----END \1-----", re.DOTALL)
_CREATE_INVALID = "error failed to validate github endpoint params: "
_UPDATE_INVALID = "failed to validate github endpoint params: "


class EndpointError(Exception):
    """A refusal: the caller turns it into GARM's error answer."""

    def __init__(self, status: int, details: str) -> None:
        super().__init__(details)
        self.status = status
        self.details = details


@dataclass
class Endpoint:
    """One endpoint row."""

    name: str
    created_at: datetime
    updated_at: datetime
    description: str = "The github.com endpoint"
    api_base_url: str = "https://api.github.com/"
    upload_base_url: str = "https://uploads.github.com/"
    base_url: str = "https://github.com"
    ca_cert_bundle: bytes | None = None

    def values(self) -> dict[str, Any]:
        """The ``ForgeEndpoint`` fields (nested in credentials, entities and scale sets too)."""
        return {
            "name": self.name,
            "description": self.description,
            "api_base_url": self.api_base_url,
            "upload_base_url": self.upload_base_url,
            "base_url": self.base_url,
            "ca_cert_bundle": self.ca_cert_bundle or None,
            "endpoint_type": "github",
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }

    def wire(self) -> dict[str, Any]:
        """The endpoint as GARM answers it."""
        return to_wire("ForgeEndpoint", self.values())


def sanitize_bundle(bundle: bytes) -> bytes | None:
    """GARM's ``SanitizeCABundle``: every PEM block re-encoded once; no block gives None."""
    seen: list[bytes] = []
    for _kind, body in _PEM.findall(bundle):
        try:
            der = base64.b64decode(b"".join(body.split()), validate=True)
            x509.load_der_x509_certificate(der)
        except (binascii.Error, ValueError) as exc:
            raise EndpointError(
                500, f"failed to sanitize CA bundle: invalid certificate in PEM bundle: {exc}"
            ) from None
        if der not in seen:
            seen.append(der)
    if not seen:
        return None
    return b"".join(_pem(der) for der in seen)


def _pem(der: bytes) -> bytes:
    text = base64.b64encode(der)
    lines = [text[i : i + 64] for i in range(0, len(text), 64)]
    return b"-----BEGIN CERTIFICATE-----\n" + b"\n".join(lines) + b"\n-----END CERTIFICATE-----\n"


def _check_urls(body: dict[str, Any], prefix: str, required: bool) -> None:
    """GARM's ``Validate``: api, upload, base in that order; a bad scheme blames the API URL."""
    for key in URL_FIELDS:
        if key not in body:
            if required:
                raise EndpointError(400, f"{prefix}missing {key}")
            continue
        parts = urlsplit(body[key])
        if not parts.scheme or not parts.netloc:
            raise EndpointError(400, f"{prefix}invalid {key}")
        if parts.scheme not in ("http", "https"):
            raise EndpointError(400, f"{prefix}invalid api_base_url")


def _given_bundle(body: dict[str, Any]) -> tuple[bool, bytes | None]:
    """Whether a bundle is given, and what GARM's sanitising leaves of it (before validation).

    Text without any PEM block leaves nothing: GARM then acts as if no bundle was given.
    """
    if "ca_cert_bundle" not in body:
        return False, None
    bundle: bytes = body["ca_cert_bundle"]
    if not bundle:
        return True, bundle  # not sanitised: validated, and refused, as it is
    sanitized = sanitize_bundle(bundle)
    return sanitized is not None, sanitized


def _check_bundle(given: tuple[bool, bytes | None], prefix: str) -> bytes | None:
    """GARM validates the first PEM block of a given bundle only."""
    present, bundle = given
    if not present:
        return None
    if bundle is None or _PEM.search(bundle) is None:
        raise EndpointError(400, f"{prefix}invalid ca_cert_bundle")
    return bundle


class EndpointStore:
    """The endpoint rows, github.com first."""

    def __init__(self, now: datetime) -> None:
        self.rows: dict[str, Endpoint] = {
            DEFAULT_ENDPOINT: Endpoint(DEFAULT_ENDPOINT, created_at=now, updated_at=now)
        }

    @property
    def default(self) -> Endpoint:
        """github.com's endpoint."""
        return self.rows[DEFAULT_ENDPOINT]

    def find(self, name: str) -> Endpoint | None:
        """The endpoint of that name, compared without regard to case."""
        return self.rows.get(name.lower())

    def get(self, name: str) -> Endpoint:
        """``GET /github/endpoints/{name}``."""
        found = self.find(name)
        if found is None:
            raise EndpointError(
                404, "failed to get github endpoint: github endpoint not found: not found"
            )
        return found

    def create(self, body: dict[str, Any], now: datetime) -> Endpoint:
        """``POST /github/endpoints``."""
        given = _given_bundle(body)
        _check_urls(body, _CREATE_INVALID, required=True)
        bundle = _check_bundle(given, _CREATE_INVALID)
        name = body.get("name", "")
        if self.find(name) is not None:
            raise EndpointError(
                409,
                "failed to create github endpoint: error creating github endpoint: error github "
                "endpoint already exists: duplicate",
            )
        row = Endpoint(
            name=name,
            created_at=now,
            updated_at=now,
            description=body.get("description", ""),
            api_base_url=body["api_base_url"],
            upload_base_url=body["upload_base_url"],
            base_url=body["base_url"],
            ca_cert_bundle=bundle,
        )
        self.rows[name.lower()] = row
        return row

    def update(
        self, name: str, body: dict[str, Any], now: datetime, has_credentials: bool
    ) -> Endpoint:
        """``PUT /github/endpoints/{name}``: only what is given and differs changes."""
        given = _given_bundle(body)
        _check_urls(body, _UPDATE_INVALID, required=False)
        bundle = _check_bundle(given, _UPDATE_INVALID)
        row = self.find(name)
        if row is None:
            raise EndpointError(
                404,
                "failed to update github endpoint: error updating github endpoint: error github "
                "endpoint not found: not found",
            )
        fields = (*URL_FIELDS, "description")
        changes: dict[str, Any] = {
            k: body[k] for k in fields if k in body and body[k] != getattr(row, k)
        }
        if bundle is not None and bundle != row.ca_cert_bundle:
            changes["ca_cert_bundle"] = bundle
        if has_credentials and set(changes) & set(URL_FIELDS):
            raise EndpointError(
                400,
                "failed to update github endpoint: error updating github endpoint: cannot "
                "update endpoint URLs with existing credentials: invalid request",
            )
        for key, value in changes.items():
            setattr(row, key, value)
        if changes:
            row.updated_at = now
        return row

    def delete(self, name: str, in_use: bool) -> None:
        """``DELETE /github/endpoints/{name}``: an unknown name is done already."""
        row = self.find(name)
        if row is None:
            return
        if in_use:
            raise EndpointError(
                400,
                "failed to delete github endpoint: error deleting github endpoint: cannot "
                "delete endpoint with associated entities: invalid request",
            )
        del self.rows[name.lower()]
