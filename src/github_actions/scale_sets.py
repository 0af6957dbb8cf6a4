"""One runner scale set looked up by name in GitHub's Actions service, and deleted.

GARM registers every scale set in GitHub's Actions service and deletes it there when it deletes
the scale set; a GARM whose database was lost or restored no longer knows the ones it
registered, and GitHub refuses a second scale set of a name in a runner group (ADR 0016). Only
the charm remembers which of them are its own, so only the charm can clear one away.

This module reaches GitHub as GARM's client does, with the configurator's GitHub App: an App
JWT (RS256, signed with ``cryptography``), an installation token, the entity's registration
token, the Actions service's URL and admin token from ``runner-registration``, then
``_apis/runtime/runnerscalesets`` (``api-version=6.0-preview``). Every call is one HTTP request
through httpx; a refusal is a :class:`GitHubError` carrying GitHub's status, never a token.
Knows neither Juju nor GARM; must not import ops.
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
import time
from dataclasses import dataclass, field
from typing import Any, cast

import httpx
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

logger = logging.getLogger(__name__)

API_VERSION = "6.0-preview"
SCALE_SETS = "_apis/runtime/runnerscalesets"
RUNNER_GROUPS = "_apis/runtime/runnergroups/"
# GARM's answer when GitHub refuses a scale set: GitHub words the name's conflict this way.
ALREADY_EXISTS = "already exists in runner group"
DEFAULT_GROUP = "Default"
DEFAULT_GROUP_ID = 1
TIMEOUT = 30.0
# An App JWT may live at most 10 minutes; issued a minute early against clock drift, as
# GitHub's documentation advises.
JWT_BACKDATE = 60
JWT_LIFETIME = 540


class GitHubError(Exception):
    """GitHub refused or failed a call, or could not be reached (``status`` None)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        """Keep GitHub's status with the message (which holds no token)."""
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class GitHubTarget:
    """Where and as whom the charm reaches GitHub for one entity.

    Attributes:
        api_url: the REST API's base URL (``https://api.github.com/``, a GHES's ``/api/v3/``).
        base_url: the web base URL (``https://github.com``), where entity URLs and
            ``runner-registration`` live.
        ca_bundle: PEM certificates to trust for a GitHub Enterprise Server, "" for none.
        app_id: the GitHub App's id.
        installation_id: the App's installation on the entity's owner.
        private_key: the App's private key (PEM); never logged.
        entity_type: ``organization`` or ``repository``.
        entity_name: the organisation, or ``owner/repo``.
    """

    api_url: str
    base_url: str
    ca_bundle: str
    app_id: int
    installation_id: int
    private_key: str = field(repr=False)
    entity_type: str
    entity_name: str


@dataclass(frozen=True)
class GitHubScaleSet:
    """A runner scale set as GitHub's Actions service lists it."""

    id: int
    name: str
    runner_group_id: int
    runner_group_name: str


def refused_as_taken(message: str) -> bool:
    """Tell whether GARM's refusal of a create is GitHub's "a scale set of that name exists"."""
    return ALREADY_EXISTS in message


class ActionsClient:
    """The Actions service of one entity, reached with its GitHub App (closed after use)."""

    def __init__(self, target: GitHubTarget, *, timeout: float = TIMEOUT) -> None:
        """Prepare the HTTP client; nothing is asked of GitHub until the first call."""
        self._target = target
        verify: ssl.SSLContext | bool = True
        if target.ca_bundle:
            verify = ssl.create_default_context(cadata=target.ca_bundle)
        self._http = httpx.Client(timeout=timeout, verify=verify)
        self._admin: tuple[str, str] | None = None

    def close(self) -> None:
        """Close the HTTP client."""
        self._http.close()

    def __enter__(self) -> ActionsClient:
        """Use as a context manager."""
        return self

    def __exit__(self, *_exc: object) -> None:
        """Close on exit."""
        self.close()

    def find(self, name: str, runner_group: str) -> GitHubScaleSet | None:
        """The scale set GitHub holds under ``name`` in the runner group named so, if any."""
        group_id = self._group_id(runner_group)
        listing = self._actions("GET", SCALE_SETS, {"runnerGroupId": group_id, "name": name})
        for raw in _values(listing):
            found = _scale_set(raw)
            if found is not None and found.name == name:
                return found
        return None

    def delete(self, scale_set_id: int) -> None:
        """Delete one scale set (GitHub answers 204)."""
        self._actions("DELETE", f"{SCALE_SETS}/{scale_set_id}", {})

    # --- the calls GARM makes, in its order ----------------------------------------------------

    def _group_id(self, runner_group: str) -> int:
        # GARM's rule: a repository's runners, and the default group, are group 1.
        if self._target.entity_type == "repository" or runner_group.lower() in (
            "",
            DEFAULT_GROUP.lower(),
        ):
            return DEFAULT_GROUP_ID
        listing = self._actions("GET", RUNNER_GROUPS, {"groupName": runner_group})
        for raw in _values(listing):
            if raw.get("name") == runner_group and isinstance(raw.get("id"), int):
                return cast(int, raw["id"])
        raise GitHubError(f"GitHub has no runner group named {runner_group!r}", 404)

    def _actions(self, method: str, path: str, query: dict[str, Any]) -> dict[str, Any]:
        url, token = self._admin_info()
        params = {**{k: str(v) for k, v in query.items()}, "api-version": API_VERSION}
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        return self._call(method, url.rstrip("/") + "/" + path, headers=headers, params=params)

    def _admin_info(self) -> tuple[str, str]:
        if self._admin is None:
            registration = self._registration_token()
            body = {"url": self._entity_url(), "runner_event": "register"}
            answer = self._call(
                "POST",
                self._target.base_url.rstrip("/") + "/actions/runner-registration",
                headers={"Authorization": f"RemoteAuth {registration}"},
                json_body=body,
            )
            url, token = answer.get("url"), answer.get("token")
            if not isinstance(url, str) or not isinstance(token, str):
                raise GitHubError("runner-registration answered without a URL and token")
            self._admin = (url, token)
        return self._admin

    def _registration_token(self) -> str:
        installation = self._installation_token()
        kind = "orgs" if self._target.entity_type == "organization" else "repos"
        answer = self._call(
            "POST",
            f"{self._api()}{kind}/{self._target.entity_name}/actions/runners/registration-token",
            headers={"Authorization": f"token {installation}"},
        )
        return _token(answer, "registration token")

    def _installation_token(self) -> str:
        answer = self._call(
            "POST",
            f"{self._api()}app/installations/{self._target.installation_id}/access_tokens",
            headers={"Authorization": f"Bearer {app_jwt(self._target)}"},
        )
        return _token(answer, "installation token")

    def _entity_url(self) -> str:
        return f"{self._target.base_url.rstrip('/')}/{self._target.entity_name}"

    def _api(self) -> str:
        return self._target.api_url.rstrip("/") + "/"

    def _call(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str],
        params: dict[str, str] | None = None,
        json_body: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        headers = {"Accept": "application/vnd.github+json", **headers}
        try:
            response = self._http.request(
                method, url, headers=headers, params=params, json=json_body
            )
        except httpx.HTTPError as exc:
            raise GitHubError(f"GitHub did not answer {method} {_path(url)}: {exc}") from exc
        if response.status_code >= 400:
            raise GitHubError(
                f"GitHub answered {response.status_code} to {method} {_path(url)}: "
                f"{_message(response)}",
                response.status_code,
            )
        if not response.content.strip():
            return {}
        try:
            parsed: object = json.loads(response.content.lstrip(b"\xef\xbb\xbf"))
        except ValueError as exc:
            raise GitHubError(f"GitHub answered {method} {_path(url)} with no JSON") from exc
        return cast(dict[str, Any], parsed) if isinstance(parsed, dict) else {}


def app_jwt(target: GitHubTarget, now: float | None = None) -> str:
    """The GitHub App's JWT: RS256 over ``iat``, ``exp`` and ``iss``, as GitHub requires."""
    issued = int(now if now is not None else time.time()) - JWT_BACKDATE
    header = {"alg": "RS256", "typ": "JWT"}
    claims = {"iat": issued, "exp": issued + JWT_BACKDATE + JWT_LIFETIME, "iss": target.app_id}
    signing_input = f"{_b64url_json(header)}.{_b64url_json(claims)}".encode()
    key = serialization.load_pem_private_key(target.private_key.encode(), password=None)
    if not isinstance(key, rsa.RSAPrivateKey):
        raise GitHubError("the GitHub App key is not an RSA key")
    signature = key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input.decode()}.{_b64url(signature)}"


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _b64url_json(value: dict[str, Any]) -> str:
    return _b64url(json.dumps(value, separators=(",", ":")).encode())


def _token(answer: dict[str, Any], what: str) -> str:
    token = answer.get("token")
    if not isinstance(token, str) or not token:
        raise GitHubError(f"GitHub answered without a {what}")
    return token


def _values(listing: dict[str, Any]) -> list[dict[str, Any]]:
    values = listing.get("value")
    if not isinstance(values, list):
        return []
    return [cast(dict[str, Any], v) for v in cast(list[object], values) if isinstance(v, dict)]


def _scale_set(raw: dict[str, Any]) -> GitHubScaleSet | None:
    id_, name = raw.get("id"), raw.get("name")
    if not isinstance(id_, int) or not isinstance(name, str):
        return None
    group_id = raw.get("runnerGroupId")
    group_name = raw.get("runnerGroupName")
    return GitHubScaleSet(
        id_,
        name,
        group_id if isinstance(group_id, int) else 0,
        group_name if isinstance(group_name, str) else "",
    )


def _path(url: str) -> str:
    """The URL's path alone: a query or host may carry nothing secret, but stays out of logs."""
    return httpx.URL(url).path


def _message(response: httpx.Response) -> str:
    """GitHub's ``message`` in a refusal, at most 200 characters."""
    try:
        body: object = response.json()
    except ValueError:
        return response.reason_phrase
    if isinstance(body, dict):
        message = cast(dict[str, Any], body).get("message")
        if isinstance(message, str):
            return message[:200]
    return response.reason_phrase
