"""GitHub Apps for a real GARM: each App GARM is configured with exists on the GitHub stand-in.

On GitHub an App and its private key exist before an operator hands the key to GARM; the
stand-in refuses a JWT from an App it does not know. :func:`register_configured_apps` stands
for that precondition: once GARM accepts new App credentials (``POST /github/credentials``
answered 200 through the recording proxy), the App's key is added on the stand-in, before the
answer reaches the caller.

Only a credential's first key is given to GitHub this way. A key that reaches GARM later
(``PUT /github/credentials/{id}``, a rotation) is the test's to add on GitHub
(``GitHubStandin.add_app_key``), as an operator generates the new key on GitHub before
handing it over; one that GitHub does not hold is refused, as GitHub refuses it.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from tests.github_standin import GitHubStandin
from tests.real_garm.proxy import RecordedCall, RecordingProxy

CREDENTIALS_PATH = "/github/credentials"


def configured_app(call: RecordedCall) -> tuple[int, str] | None:
    """The App id and PEM key of new App credentials GARM accepted, else None."""
    if (call.method, call.path, call.status) != ("POST", CREDENTIALS_PATH, 200):
        return None
    body: Any = call.body
    app = body.get("app") if isinstance(body, dict) else None
    if not isinstance(app, dict):
        return None
    app_id, key = app.get("app_id"), app.get("private_key_bytes")
    if not isinstance(app_id, int) or not isinstance(key, str):
        return None
    try:
        return app_id, base64.b64decode(key, validate=True).decode("ascii")
    except (binascii.Error, UnicodeDecodeError):
        return None


def register_configured_apps(proxy: RecordingProxy, github: GitHubStandin) -> None:
    """Have every App credential GARM accepts through ``proxy`` exist on ``github``."""

    def observe(call: RecordedCall) -> None:
        found = configured_app(call)
        if found is not None:
            github.add_app_key(*found)

    proxy.observers.append(observe)
