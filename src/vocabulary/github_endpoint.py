"""A GitHub Enterprise Server endpoint: its base URL, the name GARM knows it by, its CA bundle.

Owns the checks of the two configurator values that place a configurator on a GitHub
Enterprise Server (``github_base_url`` and ``github_ca_bundle``, ADR 0014), the endpoint name
derived from a base URL (stable: the same URL always gives the same name), the API and upload
URLs GitHub Enterprise Server serves under its base URL, and the form in which two CA bundles
are compared (the certificates they hold, as GARM keeps them). Pure: must not import ops, the
GARM client or other charm modules; never quotes the values it checks.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
import ssl
from urllib.parse import urlsplit

# GARM's built-in endpoint; a configurator without a base URL (or with github.com's) is on it.
DEFAULT_GITHUB_ENDPOINT = "github.com"
GITHUB_COM_HOSTS = frozenset({"github.com", "www.github.com"})
BASE_URL_FIELD = "github_base_url"
CA_BUNDLE_FIELD = "github_ca_bundle"
# A GHES CA chain is a few KiB; a whole public CA store (~220 KiB) is not what the key is for,
# and every bundle also rides in GARM's service environment (``endpoint_trust``).
CA_BUNDLE_MAX_BYTES = 64 * 1024
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----\s*(.*?)\s*-----END \1-----", re.DOTALL)
_HOST = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*")


def endpoint_name(base_url: str) -> str | None:
    """The GARM endpoint a base URL names: its host, with ``-<port>`` for a port other than 443.

    Args:
        base_url: the configurator's ``github_base_url`` (stripped); ``""`` means github.com.

    Returns:
        :data:`DEFAULT_GITHUB_ENDPOINT` for no URL or github.com's own, the derived name for a
        GitHub Enterprise Server (an IPv6 host as ``ipv6-<address, colons as dashes>``), None
        when the URL is not one the charm accepts (:func:`base_url_problem` says why).
    """
    if not base_url:
        return DEFAULT_GITHUB_ENDPOINT
    if base_url_problem(base_url):
        return None
    parts = urlsplit(base_url)
    host = (parts.hostname or "").lower()
    if host in GITHUB_COM_HOSTS:
        return DEFAULT_GITHUB_ENDPOINT
    if ":" in host:
        # An IPv6 address: its compressed form (one spelling per address), with the colons
        # that a URL path and a credential name should not hold made dashes.
        host = "ipv6-" + ipaddress.ip_address(host).compressed.replace(":", "-")
    port = parts.port
    return host if port in (None, 443) else f"{host}-{port}"


def read_endpoint(base_url: str, bundle: str) -> tuple[str, str]:
    """The endpoint a configurator's two values name, or why they are refused.

    Args:
        base_url: ``github_base_url``, stripped (``""``: github.com).
        bundle: ``github_ca_bundle``, stripped (``""``: none).

    Returns:
        ``(name, "")`` when acceptable, ``("", reason)`` when not; the reason names the key.
    """
    reason = base_url_problem(base_url) if base_url else ""
    name = "" if reason else endpoint_name(base_url) or ""
    if name and bundle:
        if name == DEFAULT_GITHUB_ENDPOINT:
            reason = f"{CA_BUNDLE_FIELD} is set without a GitHub Enterprise Server base URL"
        else:
            reason = ca_bundle_problem(bundle)
    return ("", reason) if reason else (name, "")


def base_url_problem(base_url: str) -> str:
    """Tell what is wrong with a GitHub Enterprise Server base URL, never quoting it.

    The charm accepts ``https://<host>[:<port>]`` with at most a trailing ``/``: App tokens and
    runner registration tokens cross it, so never plain HTTP, and GitHub Enterprise Server
    serves its API at ``/api/v3/`` under the root of its host.

    Returns:
        ``""`` when the URL is acceptable, else the reason naming the key.
    """
    try:
        parts = urlsplit(base_url)
        port = parts.port
    except ValueError:
        return f"{BASE_URL_FIELD} is not a URL"
    del port  # read only for its check: a port that is not a number raises above
    if parts.scheme != "https":
        return f"{BASE_URL_FIELD} must be an https:// URL"
    host = parts.hostname or ""
    if not _HOST.fullmatch(host) and not _is_ip(host):
        return f"{BASE_URL_FIELD} has no valid host name"
    if parts.username is not None or parts.password is not None:
        return f"{BASE_URL_FIELD} must not hold a user name or password"
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return f"{BASE_URL_FIELD} must be the server's root URL, without a path"
    return ""


def root_url(base_url: str) -> str:
    """The base URL as GARM gets it: ``https://<host>[:<port>]`` without a trailing ``/``."""
    return base_url.rstrip("/")


def api_base_url(base_url: str) -> str:
    """Where GitHub Enterprise Server serves its REST API."""
    return f"{root_url(base_url)}/api/v3/"


def upload_base_url(base_url: str) -> str:
    """Where GitHub Enterprise Server takes uploads."""
    return f"{root_url(base_url)}/api/uploads/"


def ca_bundle_problem(bundle: str) -> str:
    """Tell what is wrong with a PEM CA bundle, never quoting it.

    GARM checks only the first PEM block of a bundle and fails on a later block that is not a
    certificate, so the charm checks every block: each must be an X.509 ``CERTIFICATE``.

    Returns:
        ``""`` when the bundle holds one or more certificates and nothing else within
        :data:`CA_BUNDLE_MAX_BYTES`, else the reason.
    """
    if len(bundle.encode("utf-8", "replace")) > CA_BUNDLE_MAX_BYTES:
        return f"{CA_BUNDLE_FIELD} is over {CA_BUNDLE_MAX_BYTES:,} bytes"
    blocks = _PEM_BLOCK.findall(bundle)
    if not blocks:
        return f"{CA_BUNDLE_FIELD} holds no PEM certificate"
    if any(kind != "CERTIFICATE" for kind, _ in blocks):
        return f"{CA_BUNDLE_FIELD} holds a PEM block that is not a CERTIFICATE"
    if _PEM_BLOCK.sub("", bundle).strip():
        return f"{CA_BUNDLE_FIELD} holds text outside its PEM blocks"
    try:
        ssl.create_default_context(cadata=bundle)
    except (ssl.SSLError, ValueError):
        return f"{CA_BUNDLE_FIELD} holds a certificate that does not parse"
    return ""


def ca_certificates(bundle: str) -> tuple[bytes, ...]:
    """The certificates (DER) of a PEM bundle, in order, each once.

    GARM stores a bundle re-encoded and without duplicates, so two bundles are the same for it
    when they hold the same certificates: this is the form the charm compares.
    """
    seen: list[bytes] = []
    for _kind, body in _PEM_BLOCK.findall(bundle):
        try:
            der = base64.b64decode("".join(body.split()), validate=True)
        except (binascii.Error, ValueError):
            continue
        if der not in seen:
            seen.append(der)
    return tuple(seen)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
