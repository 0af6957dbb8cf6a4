"""The tmate server runners are told of, and the relay to it through the runner proxy.

Owns :class:`DebugSshConnection` (a tmate server published over debug-ssh), the relay's fixed
facts (the pre-install script's name, the loopback address and port it listens on) and the one
parse of a runner proxy value into what the relay needs (:class:`ProxyAddress`), refusing with a
reason that names the key and never the value (:class:`RelayRefused`). Where runners reach the
outside only through the proxy, a ``socat`` on the runner listens on the loopback address (which
aproxy never redirects) and reaches the tmate server with an HTTP CONNECT through the proxy.
Pure: must not import ops, the GARM client or any other charm module.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

# The pre-install script that starts the relay: after aproxy's ``00-aproxy`` (GARM runs the
# scripts in name order), so its package install goes out through aproxy.
RELAY_SCRIPT_NAME = "01-tmate-proxy"
RELAY_HOST = "127.0.0.1"
RELAY_PORT = 3129
# An ``http://`` proxy named without a port is on HTTP's port, as Go's and Python's clients
# read it.
DEFAULT_PROXY_PORT = 80
PROXY_KEY = "runner_http_proxy"

# A DNS name (underscores allowed, as internal names have them): letters, digits, ``_`` and
# ``-``, labels of at most 63 characters, 253 in all; nothing systemd, socat or a shell reads.
_HOST_NAME = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9_][A-Za-z0-9_-]{0,62}(?:\.[A-Za-z0-9_][A-Za-z0-9_-]{0,62})*"
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class DebugSshConnection:
    """A tmate server published over the debug-ssh relation.

    ``unit_name`` names the unit that published it, for a status; it takes no part in
    comparisons.
    """

    host: str
    port: int
    rsa_fingerprint: str
    ed25519_fingerprint: str
    unit_name: str = field(default="", compare=False)


class RelayRefused(ValueError):  # noqa: N818 (a refusal, not a failure of the charm)
    """A value the relay cannot be built from; ``reason`` names the key, never the value.

    Attributes:
        reason: the status fragment, for example ``runner_http_proxy cannot carry the tmate
            relay: not an http:// proxy``.
        server_side: the tmate server's value is refused (not the proxy's).
    """

    def __init__(self, reason: str, *, server_side: bool = False) -> None:
        """Refuse a value for ``reason``."""
        self.reason = reason
        self.server_side = server_side
        super().__init__(reason)


def _proxy_refused(why: str) -> RelayRefused:
    return RelayRefused(f"{PROXY_KEY} cannot carry the tmate relay: {why}")


@dataclass(frozen=True)
class ProxyAddress:
    """The runner proxy as the relay reaches it.

    Attributes:
        host: a DNS name or an IP address, as :func:`relay_host` writes it.
        port: the proxy's port.
        credentials: ``user:password`` for HTTP basic authentication, empty without; kept out
            of repr.
    """

    host: str
    port: int
    credentials: str = field(default="", repr=False)


@dataclass(frozen=True)
class TmateRelay:
    """A scale set's relay: its runner proxy and the tmate server it reaches through it.

    Attributes:
        proxy: the runner proxy.
        server: the tmate server.
        target: the server's host as :func:`relay_host` writes it.
    """

    proxy: ProxyAddress
    server: DebugSshConnection
    target: str

    @classmethod
    def through(cls, proxy: str, server: DebugSshConnection) -> TmateRelay:
        """The relay to ``server`` through the runner proxy ``proxy``.

        Raises:
            RelayRefused: the proxy value or the server's host cannot carry a relay.
        """
        target = relay_host(server.host)
        if target is None:
            raise RelayRefused(
                "the tmate relay cannot reach the debug-ssh host: not a DNS name or IP address",
                server_side=True,
            )
        return cls(proxy_address(proxy), server, target)

    @property
    def relayed(self) -> DebugSshConnection:
        """The tmate server as the runners are told of it: the relay on the loopback address."""
        server = self.server
        return DebugSshConnection(
            RELAY_HOST, RELAY_PORT, server.rsa_fingerprint, server.ed25519_fingerprint
        )


def relay_host(host: str) -> str | None:
    """A host as the relay writes it (an IPv6 address in brackets); None when it cannot be.

    Only a DNS name or an IP address without a zone passes: the host goes into a systemd unit
    and a socat address, and nothing in it may be read as syntax there.
    """
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host if _HOST_NAME.fullmatch(host) else None
    if isinstance(address, ipaddress.IPv6Address):
        return None if address.scope_id else f"[{address.compressed}]"
    return address.compressed


def proxy_address(value: str) -> ProxyAddress:
    """Parse a runner proxy value (``[http://][user:password@]host[:port][/]``) for the relay.

    A value without a scheme is read as ``http://``; one without a port uses port 80. The user
    and password are percent-decoded.

    Raises:
        RelayRefused: not an ``http://`` proxy, no usable host, a port outside 1..65535, or
            credentials HTTP basic authentication cannot carry.
    """
    text = value.strip()
    try:
        parts = urlsplit(text if "://" in text else f"http://{text}")
        port = parts.port
    except ValueError:
        raise _proxy_refused("no host and port it can use") from None
    if parts.scheme != "http":
        raise _proxy_refused("not an http:// proxy")
    host = relay_host(parts.hostname or "")
    if host is None or port == 0:
        raise _proxy_refused("no host and port it can use")
    credentials = _credentials(parts.username, parts.password)
    return ProxyAddress(host, port or DEFAULT_PROXY_PORT, credentials)


def _credentials(username: str | None, password: str | None) -> str:
    """``user:password`` decoded from the URL; empty without a user."""
    if username is None:
        return ""
    user, secret = unquote(username), unquote(password or "")
    # Basic authentication joins the two with the first colon, and a line break would end the
    # header: neither can be sent.
    if ":" in user or _CONTROL.search(user + secret):
        raise _proxy_refused("credentials HTTP basic authentication cannot carry")
    return f"{user}:{secret}"
