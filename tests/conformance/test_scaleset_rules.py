"""GARM's rules for scale sets and entity ids, pinned on both backends over raw HTTP.

Measured on the real binary (v0.2.1-afda4e76): the system templates and how a scale set gets
one, the refusal of a malformed organization or repository id, a scale set name GitHub already
has (GARM passes GitHub's 400 on; here GitHub is the stand-in), and which updates start a new
scale set ``generation``.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conformance.conftest import ADMIN_PASSWORD, ADMIN_USERNAME, Garm
from tests.conformance.payloads import scaleset_body
from tests.rsa_keys import pkcs1_pem

WEBHOOK_SECRET = "ef" * 32
NO_SUITABLE = "failed to find suitable template: "
TEMPLATE_NOT_FOUND = NO_SUITABLE + "failed to get template: failed to get template: not found"
SYSTEM_TEMPLATES = [
    (1, "github_windows", "windows", "github"),
    (2, "github_linux", "linux", "github"),
    (3, "gitea_linux", "linux", "gitea"),
    (4, "gitea_windows", "windows", "gitea"),
]


def answer(response: httpx.Response) -> tuple[int, Any]:
    return response.status_code, response.json()


def refusal(status: int, details: str) -> tuple[int, dict[str, str]]:
    error = {400: "Bad Request", 404: "Not Found"}[status]
    return status, {"error": error, "details": details}


def mismatch(what: str, selected: str, wanted: str) -> str:
    return (
        f"{NO_SUITABLE}selected template {what} type ({selected}) and pool {what} type"
        f" ({wanted}) do not match"
    )


@pytest.fixture
def admin(ready_garm: Garm) -> Iterator[httpx.Client]:
    """An admin HTTP client, with App credentials ``app`` created."""
    with httpx.Client(base_url=ready_garm.url, timeout=30) as http:
        login = http.post(
            "/auth/login", json={"username": ADMIN_USERNAME, "password": ADMIN_PASSWORD}
        )
        http.headers["Authorization"] = f"Bearer {login.json()['token']}"
        key = base64.b64encode(pkcs1_pem(0).encode("ascii")).decode("ascii")
        app = {"app_id": 31, "installation_id": 32, "private_key_bytes": key}
        credential = {"name": "app", "endpoint": "github.com", "auth_type": "app", "app": app}
        assert http.post("/github/credentials", json=credential).status_code == 200
        yield http


def create_org(admin: httpx.Client, name: str = "acme") -> str:
    body = {"name": name, "credentials_name": "app", "webhook_secret": WEBHOOK_SECRET}
    status, org = answer(admin.post("/organizations", json=body))
    assert status == 200
    return org["id"]


def create_repo(admin: httpx.Client, owner: str = "acme", name: str = "widgets") -> str:
    body = {
        "owner": owner,
        "name": name,
        "credentials_name": "app",
        "webhook_secret": WEBHOOK_SECRET,
    }
    status, repo = answer(admin.post("/repositories", json=body))
    assert status == 200
    return repo["id"]


def test_system_templates_and_how_a_scaleset_gets_one(admin: httpx.Client):
    listed = admin.get("/templates").json()
    assert [(t["id"], t["name"], t["os_type"], t["forge_type"]) for t in listed] == (
        SYSTEM_TEMPLATES
    )
    assert {t["owner_id"] for t in listed} == {"system"}
    scalesets = f"/organizations/{create_org(admin)}/scalesets"

    # Nothing sent: the system template of the scale set's OS for a GitHub forge.
    for name, os_type, template in (("plain", "linux", 2), ("win", "windows", 1)):
        status, created = answer(admin.post(scalesets, json=scaleset_body(name, os_type=os_type)))
        assert status == 200
        assert (created["template_id"], created["template_name"]) == (
            template,
            SYSTEM_TEMPLATES[template - 1][1],
        )
    # An id sent is looked up as it is, 0 included, then checked: OS first, then forge.
    for template_id, refused in (
        (0, refusal(404, TEMPLATE_NOT_FOUND)),
        (999, refusal(404, TEMPLATE_NOT_FOUND)),
        (1, refusal(400, mismatch("OS", "windows", "linux"))),
        (3, refusal(400, mismatch("forge", "gitea", "github"))),
        (4, refusal(400, mismatch("OS", "windows", "linux"))),
    ):
        body = scaleset_body("picked", template_id=template_id)
        assert answer(admin.post(scalesets, json=body)) == refused, template_id
    # The template is looked up before GARM's own checks (max_runners 0 would be 500).
    body = scaleset_body("", max_runners=0, template_id=0)
    assert answer(admin.post(scalesets, json=body)) == refusal(404, TEMPLATE_NOT_FOUND)
    # An OS no system template has, with no template sent.
    assert answer(admin.post(scalesets, json=scaleset_body("bsd", os_type="bsd"))) == refusal(
        400, NO_SUITABLE + "no template ID supplied and no default template can be found"
    )
    status, explicit = answer(admin.post(scalesets, json=scaleset_body("named", template_id=2)))
    assert (status, explicit["template_id"]) == (200, 2)

    plain = admin.get(scalesets).json()[0]
    url = f"/scalesets/{plain['id']}"
    for template_id, refused in (
        (0, refusal(404, TEMPLATE_NOT_FOUND)),
        (999, refusal(404, TEMPLATE_NOT_FOUND)),
        (1, refusal(400, mismatch("OS", "windows", "linux"))),
        (3, refusal(400, mismatch("forge", "gitea", "github"))),
    ):
        assert answer(admin.put(url, json={"template_id": template_id})) == refused, template_id
    # Size checks come before the template.
    assert answer(admin.put(url, json={"template_id": 0, "min_idle_runners": 9})) == refusal(
        400, "min_idle_runners cannot be larger than max_runners"
    )
    # The template is checked against the OS the update leaves.
    status, moved = answer(admin.put(url, json={"os_type": "windows", "template_id": 1}))
    assert (status, moved["os_type"], moved["template_id"]) == (200, "windows", 1)
    # An OS change alone keeps the template, even one of another OS.
    status, back = answer(admin.put(url, json={"os_type": "linux"}))
    assert (status, back["os_type"], back["template_id"]) == (200, "linux", 1)
    assert answer(admin.put(url, json={"os_type": "linux", "template_id": 1})) == refusal(
        400, mismatch("OS", "windows", "linux")
    )


def test_a_malformed_entity_id_is_400(admin: httpx.Client):
    org_id, repo_id = create_org(admin), create_repo(admin)
    assert org_id and repo_id
    body = scaleset_body("s")
    for plural, short, long_name in (
        ("organizations", "org", "organization"),
        ("repositories", "repo", "repository"),
    ):
        for bad, go_reason in (
            ("nope", "invalid UUID length: 4"),
            ("12", "invalid UUID length: 2"),
            ("z" * 32, "invalid UUID format"),
            ("zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz", "invalid UUID format"),
            ("x" * 41, "invalid UUID length: 41"),
        ):
            # GARM's organization lookup hides the parser's reason; the repository one shows it.
            reason = go_reason if plural == "repositories" else "invalid request"
            parse = f"error fetching {short}: error parsing id: {reason}"
            one = f"/{plural}/{bad}"
            assert answer(admin.get(one)) == refusal(
                400, f"error fetching {long_name}: {parse}"
            ), one
            assert answer(admin.put(one, json={"webhook_secret": WEBHOOK_SECRET})) == refusal(
                400, f"error updating {short}: error saving {short}: {parse}"
            ), one
            assert answer(admin.delete(one)) == refusal(400, f"error fetching {short}: {parse}"), (
                one
            )
            assert answer(admin.get(one + "/scalesets")) == refusal(
                400,
                "error fetching scale sets: error fetching scale sets: error parsing id:"
                " invalid request",
            ), one
            assert answer(admin.post(one + "/scalesets", json=body)) == refusal(
                400, f"error getting entity: error failed to get entity from db: {parse}"
            ), one
        # A well-formed id that names nothing is 404, in any of the forms Go parses.
        unknown = uuid.UUID(int=7)
        for form in (str(unknown), unknown.hex, "{" + str(unknown) + "}"):
            one = f"/{plural}/{form}"
            assert answer(admin.get(one)) == refusal(
                404, f"error fetching {long_name}: error fetching {short}: not found"
            ), one
        missing = f"/{plural}/{unknown}"
        assert answer(admin.get(missing + "/scalesets")) == refusal(
            404,
            "error fetching scale sets: error fetching scale sets: error checking entity"
            " existence: error entity not found: not found",
        )
        assert answer(admin.post(missing + "/scalesets", json=body)) == refusal(
            404,
            f"error getting entity: error failed to get entity from db: error fetching"
            f" {short}: not found",
        )


def github_refused_name(details: str, name: str) -> bool:
    """Whether ``details`` is GitHub's refusal of a taken name, as GARM passes it on."""
    return (
        "bad request while calling " in details
        and f"a runner scale set named '{name}' already exists in runner group 1" in details
    )


def test_a_taken_scaleset_name_is_githubs_400(admin: httpx.Client):
    org_scalesets = f"/organizations/{create_org(admin)}/scalesets"
    repo_scalesets = f"/repositories/{create_repo(admin)}/scalesets"
    first = admin.post(org_scalesets, json=scaleset_body("runners"))
    second = admin.post(org_scalesets, json=scaleset_body("others"))
    assert (first.status_code, second.status_code) == (200, 200)

    status, again = answer(admin.post(org_scalesets, json=scaleset_body("runners")))
    assert (status, again["error"]) == (400, "Bad Request")
    assert again["details"].startswith(
        "error creating runner scale set: failed to create runner scale set: "
    )
    assert github_refused_name(again["details"], "runners"), again["details"]
    # GitHub refuses before GARM's database checks (max_runners 0 alone would be 500).
    status, zero = answer(admin.post(org_scalesets, json=scaleset_body("runners", max_runners=0)))
    assert (status, github_refused_name(zero["details"], "runners")) == (400, True)
    # Names are per entity, and compared exactly.
    assert admin.post(repo_scalesets, json=scaleset_body("runners")).status_code == 200
    assert admin.post(org_scalesets, json=scaleset_body("Runners")).status_code == 200

    # A rename onto a taken name: GitHub refuses it through GARM's update.
    url = f"/scalesets/{second.json()['id']}"
    status, renamed = answer(admin.put(url, json={"name": "runners"}))
    assert (status, renamed["error"]) == (400, "Bad Request")
    assert renamed["details"].startswith(
        "error updating pool: error executing update callback: failed to update scaleset in"
        " github: failed to make request: "
    )
    assert github_refused_name(renamed["details"], "runners"), renamed["details"]
    assert admin.get(url).json()["name"] == "others"
    assert admin.put(url, json={"name": "others"}).status_code == 200
    org_names = sorted(s["name"] for s in admin.get(org_scalesets).json())
    assert org_names == ["Runners", "others", "runners"]


def test_which_updates_start_a_new_generation(admin: httpx.Client):
    scalesets = f"/organizations/{create_org(admin)}/scalesets"
    status, created = answer(admin.post(scalesets, json=scaleset_body("gen")))
    assert (status, created["generation"]) == (200, 0)
    template = admin.post(
        "/templates",
        json={
            "name": "own",
            "description": "",
            "os_type": "linux",
            "forge_type": "github",
            "data": base64.b64encode(b"#!/bin/bash\n").decode("ascii"),
        },
    ).json()
    url = f"/scalesets/{created['id']}"
    expected = 0
    for body, bumps in (
        ({}, False),
        ({"enabled": True}, False),
        ({"enabled": False}, False),
        ({"max_runners": 3}, False),
        ({"max_runners": 0}, False),
        ({"max_runners": 2}, False),
        ({"min_idle_runners": 1}, False),
        ({"name": "gen2"}, False),
        ({"runner_prefix": "pfx"}, False),
        ({"runner_bootstrap_timeout": 30}, False),
        ({"runner_group": "Default"}, False),
        ({"disable_update": True}, False),
        ({"template_id": template["id"]}, False),
        ({"template_id": 2}, False),
        ({"image": "ubuntu-24.04"}, False),
        ({"image": "ubuntu-26.04"}, True),
        ({"flavor": "small"}, False),
        ({"flavor": "large"}, True),
        ({"os_arch": "arm64"}, True),
        ({"os_arch": "arm64"}, False),
        ({"extra_specs": {}}, True),
        ({"extra_specs": {"a": 1, "b": 2}}, True),
        ({"extra_specs": {"a": 1, "b": 2}}, False),
        ({"extra_specs": {"b": 2, "a": 1}}, True),
        ({"enable_shell": True}, True),
        ({"enable_shell": True}, False),
        ({"enable_shell": False}, True),
        ({"os_type": "windows"}, True),
        ({"image": "a", "flavor": "b", "max_runners": 4}, True),
    ):
        expected += bumps
        status, updated = answer(admin.put(url, json=body))
        assert (status, updated["generation"]) == (200, expected), body
    assert expected == 10


def test_a_repository_scaleset_names_its_repository_owner_slash_name(admin: httpx.Client):
    repo_id = create_repo(admin, owner="Acme", name="Widgets")
    org_id = create_org(admin)
    status, on_repo = answer(
        admin.post(f"/repositories/{repo_id}/scalesets", json=scaleset_body("on-repo"))
    )
    assert status == 200
    status, on_org = answer(
        admin.post(f"/organizations/{org_id}/scalesets", json=scaleset_body("on-org"))
    )
    assert status == 200
    # Every read names the repository as its owner and name, in the case it was created with;
    # the fields of the other entity kind are left out.
    reads = [
        on_repo,
        admin.get(f"/scalesets/{on_repo['id']}").json(),
        *admin.get(f"/repositories/{repo_id}/scalesets").json(),
        *(s for s in admin.get("/scalesets").json() if s["id"] == on_repo["id"]),
    ]
    assert len(reads) == 4
    for read in reads:
        assert (read["repo_id"], read["repo_name"]) == (repo_id, "Acme/Widgets")
        assert "org_id" not in read and "org_name" not in read
    listed_org = [s for s in admin.get("/scalesets").json() if s["id"] == on_org["id"]]
    for read in (on_org, *listed_org):
        assert (read["org_id"], read["org_name"]) == (org_id, "acme")
        assert "repo_id" not in read and "repo_name" not in read
