"""A GitHub stand-in real GARM can run its whole scale-set life cycle against.

Standard library, and ``cryptography`` for the App JWT's RS256 signature. ``GitHubStandin``
serves on 127.0.0.1 (a free port) and records every request. Point GARM's ``github.com``
endpoint at it with ``endpoint_params()``.

What it answers (paths as GARM v0.2.1-afda4e76 calls them):

- REST API under ``/api/v3`` (the GitHub Enterprise Server layout go-github uses for any
  non-github.com host): ``GET rate_limit``; ``POST app/installations/{id}/access_tokens``
  (needs a GitHub App JWT, below); ``POST {orgs/o|repos/o/r|enterprises/e}/actions/
  runners/registration-token``; ``GET .../actions/runners/downloads``; ``GET {orgs/o|
  enterprises/e}/actions/runner-groups``. Answers carry ``X-RateLimit-*`` headers.
- GitHub App authentication, as GitHub checks it (:mod:`.apps`): the ``Bearer`` JWT must be
  RS256-signed by a key of the App its ``iss`` names, with an integer ``iat`` not in the
  future and an integer ``exp`` in the future but at most 10 minutes ahead. Refusals are 401
  in GitHub's words (``.apps`` holds them and says where they were read), e.g. "A JSON web
  token could not be decoded" for a bad signature or an unknown App. An App exists once a
  test gives it a key (``add_app_key``); ``revoke_app_key`` deletes one (never the only one,
  as on GitHub).
  Every judgement is in the record (``RecordedRequest.app_jwt``, ``app_jwt_checks()``): the
  claims and header as sent, the fingerprint of the key that verified, the refusal.
- ``POST /actions/runner-registration`` (``RemoteAuth <registration token>``): answers the
  entity's Actions service URL, ``{base}/actions-service/{tenant}/``, and a JWT with ``exp``.
- Actions service, ``_apis/runtime/runnerscalesets``: list (by ``name``/``runnerGroupId``),
  create, get, patch, delete (204); ``/{id}/sessions`` create, refresh (PATCH), delete;
  ``/{id}/acquirablejobs``; ``/{id}/acquirejobs``; ``/{id}/generatejitconfig``;
  ``_apis/runtime/runnergroups?groupName=``; ``_apis/distributedtask/pools/0/agents`` list (by
  ``agentName``), get, delete.
- The message queue ``/message-queue/{session}``: ``GET ?lastMessageId=N`` long-polls up to
  ``poll_timeout`` and answers 202 with an empty body when nothing came (as GARM expects);
  ``DELETE .../{messageId}`` acknowledges.
- Refusals as GitHub gives them, in JSON: 401 (missing/unknown/expired credentials), 404
  (unknown scale set, session, agent, route), 400 (duplicate scale set name in a runner group,
  as GARM's client notes), 409 (a second live session for a scale set, an existing runner
  name, deleting a busy runner). Unknown routes answer 404 and are recorded with route None.

Job flow (control API): ``queue_job`` posts JobAvailable; GARM's acquire makes the stand-in post
JobAssigned (raising ``totalAssignedJobs``, GARM's desired runner count); ``start_job`` posts
JobStarted for a runner GARM created (busy); ``complete_job`` posts JobCompleted and, as GitHub
does with an ephemeral runner, unregisters the runner. ``hold(route)`` keeps GARM's requests
to one route waiting until the test releases them, to widen a race of GARM's own.

Beware: GARM v0.2.1-afda4e76 panics and exits (a nil response in ``DeleteMessageSession``)
when the session it deletes is already gone and the stand-in answers 404, as GitHub would. So
the stand-in drops a session only when GARM deletes it, when its scale set is deleted, or when a
new session replaces one not polled for ``session_idle_timeout``. GARM still gets there when
its worker missed the disable of a scale set it then deletes
(``tests/conformance/test_garm_exit.py``).

Deliberately not done: the tokens the stand-in hands out are unsigned JWT-shaped strings (GARM
reads only their ``exp``); an installation id is not tied to an App (any id gets a token for a
valid App JWT); App client ids are not known as ``iss``; personal access tokens are accepted
as they come; runner binaries are not served (download URLs point here and answer 404); the JIT
config is well-formed but useless to a real runner; no webhooks, no REST runner listing, no
pools API, no Gitea; orgs and repos exist implicitly (any name is accepted).
"""

from .apps import key_fingerprint, sign_app_jwt
from .model import AppJwtCheck, JobView, RecordedRequest, RunnerView, ScaleSetView, StandinError
from .server import GitHubStandin

__all__ = [
    "AppJwtCheck",
    "GitHubStandin",
    "JobView",
    "RecordedRequest",
    "RunnerView",
    "ScaleSetView",
    "StandinError",
    "key_fingerprint",
    "sign_app_jwt",
]
