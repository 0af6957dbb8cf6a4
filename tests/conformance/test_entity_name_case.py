"""The letter case of organisation and repository names, as GARM treats it.

GARM keeps a name exactly as it was given, and refuses a second organisation or repository
whose name differs from an existing one only in case (409, the refusal naming the entity as the
request spelt it), whichever credentials of the same endpoint the second one names: the
duplicate check compares ``LOWER(...)`` of name (and owner) and endpoint. The list filters
(``?name=`` for organisations, ``?owner=`` and ``?name=`` for repositories) compare with a
plain ``=``, so they match the stored case only. Calls go over raw HTTP so that the exact
answer is what is pinned.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from garm import CreateCredentialParams, GarmClient, GithubApp
from tests.conformance.conftest import ADMIN_PASSWORD, ADMIN_USERNAME, Garm
from tests.rsa_keys import pkcs1_pem

WEBHOOK_SECRET = "cd" * 32
# Two App credentials on the one endpoint (github.com): the duplicate check is per endpoint.
FIRST, OTHER = "app-1", "app-2"
ORGANIZATIONS, REPOSITORIES = "/organizations", "/repositories"


class Api:
    """GARM's REST API as the admin, answers returned whole."""

    def __init__(self, client: GarmClient, garm: Garm) -> None:
        """Log in through ``client``; calls go to ``garm`` through its recording proxy."""
        self.url = garm.url
        self.headers = {"Authorization": f"Bearer {client.login(ADMIN_USERNAME, ADMIN_PASSWORD)}"}

    def call(
        self, method: str, path: str, body: Any = None, params: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        """GARM's status and decoded JSON answer."""
        answer = httpx.request(
            method, self.url + path, headers=self.headers, json=body, params=params
        )
        return answer.status_code, answer.json()

    def create_org(self, name: str, credentials: str = FIRST) -> tuple[int, Any]:
        """POST an organisation."""
        body = {"name": name, "credentials_name": credentials, "webhook_secret": WEBHOOK_SECRET}
        return self.call("POST", ORGANIZATIONS, body)

    def create_repo(self, owner: str, name: str, credentials: str = FIRST) -> tuple[int, Any]:
        """POST a repository."""
        body = {
            "owner": owner,
            "name": name,
            "credentials_name": credentials,
            "webhook_secret": WEBHOOK_SECRET,
        }
        return self.call("POST", REPOSITORIES, body)

    def org_names(self, **params: str) -> list[str]:
        """The names of the organisations GARM lists for ``params``."""
        status, listed = self.call("GET", ORGANIZATIONS, params=params)
        assert status == 200
        return [org["name"] for org in listed]

    def repo_names(self, **params: str) -> list[tuple[str, str]]:
        """The (owner, name) of the repositories GARM lists for ``params``."""
        status, listed = self.call("GET", REPOSITORIES, params=params)
        assert status == 200
        return [(repo["owner"], repo["name"]) for repo in listed]


def app_credential(name: str, index: int) -> CreateCredentialParams:
    """A GitHub App credential on github.com with a real PKCS#1 key."""
    key = base64.b64encode(pkcs1_pem(index).encode("ascii")).decode("ascii")
    return CreateCredentialParams(
        name=name,
        description="entity name case",
        endpoint="github.com",
        app=GithubApp(app_id=100 + index, installation_id=200 + index, private_key_bytes=key),
    )


@pytest.fixture
def api(client: GarmClient, ready_garm: Garm) -> Iterator[Api]:
    """The admin's API on a GARM holding the two credentials."""
    client.create_credential(app_credential(FIRST, 0))
    client.create_credential(app_credential(OTHER, 1))
    yield Api(client, ready_garm)


def test_names_keep_the_case_they_were_given(api: Api):
    status, org = api.create_org("Org-C")
    assert (status, org["name"]) == (200, "Org-C")
    status, repo = api.create_repo("Owner-C", "Repo-C")
    assert (status, repo["owner"], repo["name"]) == (200, "Owner-C", "Repo-C")
    assert api.create_org("org-b")[0] == 200
    assert api.create_repo("owner-a", "repo-a")[0] == 200

    assert api.call("GET", f"{ORGANIZATIONS}/{org['id']}")[1]["name"] == "Org-C"
    fetched = api.call("GET", f"{REPOSITORIES}/{repo['id']}")[1]
    assert (fetched["owner"], fetched["name"]) == ("Owner-C", "Repo-C")
    assert sorted(api.org_names()) == ["Org-C", "org-b"]
    assert sorted(api.repo_names()) == [("Owner-C", "Repo-C"), ("owner-a", "repo-a")]


def test_an_organisation_differing_only_in_case_is_refused(api: Api):
    assert api.create_org("org-b")[0] == 200
    for name, credentials in (("Org-B", FIRST), ("Org-B", OTHER), ("ORG-B", FIRST)):
        status, refusal = api.create_org(name, credentials)
        assert (status, refusal["error"]) == (409, "Conflict"), (name, credentials)
    # Other credentials on the same endpoint do not make the same name a second organisation.
    assert api.create_org("org-b", OTHER)[0] == 409
    assert api.org_names() == ["org-b"]


def test_a_repository_differing_only_in_case_is_refused(api: Api):
    assert api.create_repo("owner-a", "repo-a")[0] == 200
    for owner, name, credentials in (
        ("Owner-A", "Repo-A", FIRST),
        ("Owner-A", "Repo-A", OTHER),
        ("owner-a", "Repo-A", FIRST),
        ("Owner-A", "repo-a", FIRST),
    ):
        status, refusal = api.create_repo(owner, name, credentials)
        assert (status, refusal["error"]) == (409, "Conflict"), (owner, name, credentials)
    assert api.create_repo("owner-a", "repo-a", OTHER)[0] == 409
    assert api.repo_names() == [("owner-a", "repo-a")]


def test_the_case_refusal_names_the_entity_as_requested(api: Api):
    assert api.create_org("org-b")[0] == 200
    assert api.create_repo("owner-a", "repo-a")[0] == 200

    assert api.create_org("Org-B") == (
        409,
        {"error": "Conflict", "details": "organization Org-B already exists"},
    )
    assert api.create_org("Org-B", OTHER) == (
        409,
        {"error": "Conflict", "details": "organization Org-B already exists"},
    )
    assert api.create_org("org-b", OTHER) == (
        409,
        {"error": "Conflict", "details": "organization org-b already exists"},
    )
    assert api.create_repo("Owner-A", "Repo-A") == (
        409,
        {"error": "Conflict", "details": "repository Owner-A/Repo-A already exists"},
    )
    assert api.create_repo("Owner-A", "Repo-A", OTHER) == (
        409,
        {"error": "Conflict", "details": "repository Owner-A/Repo-A already exists"},
    )
    assert api.create_repo("owner-a", "Repo-A") == (
        409,
        {"error": "Conflict", "details": "repository owner-a/Repo-A already exists"},
    )


def test_list_filters_match_the_stored_case_only(api: Api):
    assert api.create_org("org-b")[0] == 200
    assert api.create_org("Org-C")[0] == 200
    assert api.create_repo("owner-a", "repo-a")[0] == 200
    assert api.create_repo("Owner-C", "Repo-C")[0] == 200

    assert api.org_names(name="org-b") == ["org-b"]
    assert api.org_names(name="Org-B") == []
    assert api.org_names(name="ORG-B") == []
    assert api.org_names(name="Org-C") == ["Org-C"]
    assert api.org_names(name="org-c") == []

    assert api.repo_names(owner="owner-a", name="repo-a") == [("owner-a", "repo-a")]
    assert api.repo_names(owner="Owner-A", name="Repo-A") == []
    assert api.repo_names(owner="owner-a", name="Repo-A") == []
    assert api.repo_names(owner="owner-a") == [("owner-a", "repo-a")]
    assert api.repo_names(owner="Owner-A") == []
    assert api.repo_names(name="repo-a") == [("owner-a", "repo-a")]
    assert api.repo_names(name="Repo-A") == []
    assert api.repo_names(owner="Owner-C") == [("Owner-C", "Repo-C")]
    assert api.repo_names(owner="owner-c") == []
