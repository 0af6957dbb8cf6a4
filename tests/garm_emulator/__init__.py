"""An in-process GARM for tests: GARM's HTTP API and wire format on 127.0.0.1.

Use :class:`GarmEmulator` (``with GarmEmulator(providers=["cfg-a-0"]) as garm: ...``), point
the client at ``garm.url`` and drive GARM's background work with ``garm.advance()``.

Choices where GARM's behaviour is not pinned by the spec (keep tests honest about them):

* Tokens stay valid across ``restart()``: GARM signs JWTs with a secret that outlives the process.
* ``DELETE /instances/{name}``: a runner whose status is not running/error/pending_delete/
  pending_force_delete is refused (400); a busy runner (``runner_status`` active) is refused
  (400, GitHub will not remove a runner mid-job) unless ``forceRemove=true``; a runner marked
  with ``set_github_unauthorized`` answers 401 unless ``bypassGHUnauthorized=true``.
* ``extra_specs: {}`` is stored and echoed as ``{}`` (GARM keeps the raw JSON it was sent).
  A scale set's ``generation`` goes up when an update changes its image, flavor, OS type or
  arch, extra specs or shell flag; GARM compares extra specs as the bytes sent, the emulator as
  its re-encoding of them, so only a whitespace-only difference tells the two apart.
* Templates: GARM's four system templates (ids 1-4); a scale set sent without ``template_id``
  gets the one of its OS (GitHub forge); any id sent, 0 included, must exist (404) and match the
  scale set's OS and forge (400). The seeding helper ``add_scaleset`` picks like GARM does.
* Scale set names are GitHub's to refuse (GARM passes its 400 on): unique per entity and runner
  group, compared exactly, with the GitHub stand-in's message in the details.
* Organization and repository ids are parsed as UUIDs (Go's rules): a malformed one is 400.
* System templates cannot be changed or deleted (400); a template used by a scale set cannot be
  deleted (409).
* Admin password strength (first-run): GARM wants zxcvbn-go score 4. The emulator has no zxcvbn;
  ``password.py`` refuses only what zxcvbn surely scores below 4 (short, low variety, repeats,
  sequences, the most common words, l33t included), by building an explanation of the password
  that costs fewer than ~40.9 bits. So its refusals are certain, but it accepts some passwords
  GARM refuses (``"correcthorsebattery"``, ``"Adm1n-pass-word!!"``): check a new fixture
  password on real GARM. The charm's generated passwords are always accepted.
* GitHub App keys: ``private_key_bytes`` must hold a PEM block (else 400 ``invalid
  private_key_bytes``) whose body is a PKCS#1 RSA key (else 500, as GARM's unwrapped parse
  error); checked with ``cryptography``, which every test environment installs. Use
  ``tests.rsa_keys`` for keys.
* Scale-set create refusals from GARM's database layer (``max_runners`` 0, ``min_idle_runners``
  above ``max_runners``, a missing name/image/flavor/provider) answer 500: real GARM reaches them
  only after creating the scale set on GitHub. The emulator does not model GitHub.
* Tags come back reversed (GARM promises no order), so no test can rely on the order sent.
* Endpoints (``endpoints.py``): ``github.com`` from the start, GitHub Enterprise Servers by API,
  with GARM's CA-bundle handling and refusals; an entity is on its credentials' endpoint, one
  name per endpoint. The emulator never calls any GitHub, so a CA bundle is only stored.
* A scale set whose provider is not loaded gets no work at all: its runners do not boot, do not
  scale, and pending deletes stay pending, with no ``provider_fault`` (GARM skips the runners of
  a provider it has not loaded).
* The provider succeeds unless ``refuse_provider`` says otherwise. A refused ``CreateInstance``
  leaves the runner in ``error`` with GARM's ``provider_fault`` (its wrapping of the provider's
  stderr; base64 on the wire) for one tick, then ``pending_delete`` without it (GARM's status
  update clears it), then gone and replaced; a refused ``DeleteInstance`` keeps a plain delete
  ``pending_delete`` with the fault, while a forced one goes through. Real GARM takes about 5 s
  per step; the emulator one tick.
* Organization and repository names match case-insensitively (GARM's NOCASE collation).
* The credentials list does not nest the entities using each credential.
* A job that ends on a disabled scale set is noticed only after ``CONSOLIDATION_INTERVAL`` of
  simulated time: real GARM stops listening to a disabled scale set's messages and finds such
  jobs in its runner consolidation loop.
"""

from .server import (
    API_PREFIX,
    DEFAULT_ADMIN_PASSWORD,
    GarmEmulator,
    RecordedRequest,
)
from .state import (
    CONSOLIDATION_INTERVAL,
    SYSTEM_TEMPLATE_BODY,
    SYSTEM_TEMPLATE_ID,
    SYSTEM_TEMPLATE_NAME,
    ApiError,
)
from .wire import RESPONSE_STRUCTS, to_wire

__all__ = [
    "API_PREFIX",
    "CONSOLIDATION_INTERVAL",
    "DEFAULT_ADMIN_PASSWORD",
    "RESPONSE_STRUCTS",
    "SYSTEM_TEMPLATE_BODY",
    "SYSTEM_TEMPLATE_ID",
    "SYSTEM_TEMPLATE_NAME",
    "ApiError",
    "GarmEmulator",
    "RecordedRequest",
    "to_wire",
]
