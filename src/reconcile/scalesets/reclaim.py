"""The charm's GitHub scale sets, remembered, and a stale one reclaimed after GARM lost it.

GARM registers each scale set in GitHub and reports GitHub's id on it (``scale_set_id``). When
GARM's database is lost or restored from an older copy, GitHub still holds scale sets GARM no
longer knows, and refuses a second one of the same name in the runner group: GARM answers the
create 400 "... already exists in runner group ...". The charm remembers every GitHub id GARM
registered for each of its scale sets (:class:`Registration`, kept by ``memory``), so it can
tell its own stale scale set from someone else's (ADR 0016):

- the id GitHub holds under the name is one the charm recorded (same endpoint): the scale set
  is the charm's own; it is deleted in GitHub with the configurator's App
  (``github_actions``) and the create runs again in the same pass;
- any other id belongs to someone else (another GARM, an ARC, a person): never deleted; the
  scale set is Blocked, naming the name, the runner group and GitHub's id.

Owns the record's rule (:func:`record`) and the reclaim; knows GARM's listing, GitHub through
``github_actions``; must not import ops.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

from garm import Endpoint, GarmApiError, GarmClient, ScaleSet
from github_actions import (
    ActionsClient,
    GitHubError,
    GitHubScaleSet,
    GitHubTarget,
    refused_as_taken,
)
from reconcile.containment import contain
from reconcile.endpoints import endpoint_of, stored_bundle
from vocabulary import security_events
from vocabulary.desired_state import DesiredState, ScalesetSpec, app_of_provider, entity_key
from vocabulary.notices import Notice, Severity

logger = logging.getLogger(__name__)

# GitHub ids kept per name: GARM registers a name again when its worker finds the scale set
# gone from GitHub, and a restored database may bring back any of the latest few.
KEPT_IDS = 4
DEFAULT_GROUP = "Default"

OpenGitHub = Callable[[ScalesetSpec], ActionsClient | None]
_T = TypeVar("_T")


@dataclass(frozen=True)
class Registration:
    """The GitHub scale sets GARM registered for one of the charm's scale-set names.

    Attributes:
        endpoint: GARM's name of the GitHub it is on (``github.com``, a GHES's name).
        runner_group: the runner group's name (``Default`` when the spec names none).
        ids: GitHub's ids GARM reported for it, oldest first, at most :data:`KEPT_IDS`.
    """

    endpoint: str
    runner_group: str
    ids: tuple[int, ...]


def record(
    before: Mapping[str, Registration],
    live: Iterable[ScaleSet],
    wanted: Collection[str],
    unsettled: Collection[str] = (),
) -> dict[str, Registration]:
    """The registrations after a pass.

    The id GARM lists for a scale set on a configurator's provider becomes the latest of its
    name; a name GARM no longer lists is kept while a spec still wants it under that name (it
    is what a lost database leaves in GitHub), and forgotten otherwise (the charm deleted it,
    with GARM). An ``unsettled`` name (GARM's id older than the charm's, not yet cleared up:
    :meth:`Reclaim.outdated`) keeps its ids as they were.
    """
    after = {name: entry for name, entry in before.items() if name in wanted}
    for scaleset in live:
        if not scaleset.name or not scaleset.scale_set_id or scaleset.name in unsettled:
            continue
        if not app_of_provider(scaleset.provider_name or ""):
            continue
        entry = after.get(scaleset.name) or before.get(scaleset.name)
        ids = tuple(i for i in (entry.ids if entry else ()) if i != scaleset.scale_set_id)
        ids = (*ids, scaleset.scale_set_id)[-KEPT_IDS:]
        group = scaleset.github_runner_group or DEFAULT_GROUP
        after[scaleset.name] = Registration(endpoint_of(scaleset.endpoint), group, ids)
    return after


class Verdict(Enum):
    """What a reclaim made of a refused create."""

    NOT_TAKEN = "not taken"  # the refusal is not GitHub's name conflict: the usual notice
    RECLAIMED = "reclaimed"  # the charm's stale scale set is gone from GitHub: create again
    HELD = "held"  # someone else's, or GitHub could not be asked: the reclaim's notice stands


class Reclaim:
    """Reclaims the charm's own scale-set names from GitHub after GARM lost its record."""

    def __init__(self, registered: Mapping[str, Registration], open_github: OpenGitHub) -> None:
        """Take the registrations remembered and a way to reach GitHub for a spec's entity."""
        self._registered = registered
        self._open_github = open_github
        # Names whose GARM record is older than the charm's and not cleared up yet (``record``).
        self.unsettled: set[str] = set()
        self._lock = threading.Lock()

    def outdated(self, spec: ScalesetSpec, live: ScaleSet, notices: list[Notice]) -> None:
        """Clear GitHub's later registration of a scale set GARM holds under an older id.

        A database restored from a copy older than the charm's memory can hold a scale set
        under a GitHub id the charm has since replaced (its configurator was removed and related
        again, say). GARM's worker then refuses to run it: GitHub holds the name under another
        id. That later registration is the charm's (a recorded id) and no GARM uses it: it is
        deleted, and GARM's worker registers the scale set again on its next try.
        """
        entry = self._registered.get(live.name or "")
        if entry is None or not entry.ids or not live.scale_set_id or not live.name:
            return
        if live.scale_set_id == entry.ids[-1] or entry.endpoint != spec.endpoint:
            return
        with self._lock:
            self.unsettled.add(live.name)
        github = self._open_github(spec)
        if github is None:
            return
        group = live.github_runner_group or DEFAULT_GROUP
        try:
            with github:
                found = github.find(live.name, group)
                if found is None or found.id == live.scale_set_id:
                    with self._lock:
                        self.unsettled.discard(live.name)
                elif found.id in entry.ids:
                    github.delete(found.id)
                    security_events.deleted_in_github("scale-set", live.name, found.id)
                    logger.warning(
                        "GARM holds scale set %r under GitHub id %s, older than the charm's %s"
                        " (a restored database); deleted %s in GitHub so GARM registers it again",
                        live.name,
                        live.scale_set_id,
                        found.id,
                        found.id,
                    )
                else:
                    self._foreign(spec, live.name, found, group, notices)
        except GitHubError as exc:
            _github_failed(spec, live.name, exc, notices)

    def reclaim(
        self, spec: ScalesetSpec, live_name: str, error: GarmApiError, notices: list[Notice]
    ) -> Verdict:
        """Clear ``live_name`` in GitHub when GARM's refusal of its create is a stale one of ours.

        A notice for the status is appended unless the name was reclaimed or not taken.
        """
        if error.status != 400 or not refused_as_taken(str(error)):
            return Verdict.NOT_TAKEN
        group = spec.runner_group or DEFAULT_GROUP
        github = self._open_github(spec)
        if github is None:
            notices.append(
                Notice(
                    Severity.BLOCKED,
                    spec.name,
                    f"GitHub holds a scale set named {live_name}; the charm has no GitHub App"
                    " to check whose it is",
                )
            )
            return Verdict.HELD
        try:
            with github:
                return self._settle(spec, live_name, group, github, notices)
        except GitHubError as exc:
            _github_failed(spec, live_name, exc, notices)
            return Verdict.HELD

    def _settle(
        self,
        spec: ScalesetSpec,
        live_name: str,
        group: str,
        github: ActionsClient,
        notices: list[Notice],
    ) -> Verdict:
        found = github.find(live_name, group)
        if found is None:
            # Gone since GARM asked (deleted by hand, say): the create may go again.
            return Verdict.RECLAIMED
        entry = self._registered.get(live_name)
        if entry is None or entry.endpoint != spec.endpoint or found.id not in entry.ids:
            self._foreign(spec, live_name, found, group, notices)
            return Verdict.HELD
        github.delete(found.id)
        security_events.deleted_in_github("scale-set", live_name, found.id)
        logger.warning(
            "GitHub held scale set %r (id %s), registered by this charm through a GARM database"
            " since lost or replaced; deleted it in GitHub to create it again",
            live_name,
            found.id,
        )
        return Verdict.RECLAIMED

    @staticmethod
    def _foreign(
        spec: ScalesetSpec,
        live_name: str,
        found: GitHubScaleSet,
        group: str,
        notices: list[Notice],
    ) -> None:
        logger.error(
            "GitHub holds a scale set named %r in runner group %r (id %s) that this charm"
            " never registered; it is not the charm's to delete. Delete or rename it in"
            " GitHub for scale set %r of %s to run",
            live_name,
            found.runner_group_name or group,
            found.id,
            spec.name,
            spec.source or "its configurator",
        )
        notices.append(
            Notice(
                Severity.BLOCKED,
                spec.name,
                f"GitHub holds {live_name} in runner group {found.runner_group_name or group}"
                f" (id {found.id}), not this charm's: delete it in GitHub",
            )
        )


def _github_failed(
    spec: ScalesetSpec, live_name: str, error: GitHubError, notices: list[Notice]
) -> None:
    """Note that GitHub failed while the charm was clearing ``live_name``: retried, and lasting."""
    logger.warning(
        "Scale set %r: GitHub holds one of its name, and asking GitHub about it failed:"
        " %s; will retry",
        live_name,
        error,
    )
    status = error.status if error.status is not None else "no answer"
    notices.append(
        Notice(
            Severity.WAITING,
            spec.name,
            f"GitHub holds a scale set named {live_name}; GitHub failed ({status}); will retry",
            retry=True,
        )
    )


def reclaiming(
    spec: ScalesetSpec,
    live_name: str,
    attempt: Callable[[list[Notice]], _T],
    reclaim: Reclaim | None,
    notices: list[Notice],
) -> _T | None:
    """Run one spec's calls, their failure contained; None when they failed.

    When GitHub refused the create for a stale scale set of the charm's own and ``reclaim``
    cleared it, the calls run once more. The notices of a failed attempt are kept unless the
    reclaim has one of its own.
    """
    for first in (True, False):
        mine: list[Notice] = []
        with contain(mine, spec.name) as refused:
            done = attempt(mine)
            notices.extend(mine)
            return done
        logger.warning("GARM refused scaleset %r: %s", spec.name, refused.error)
        verdict = Verdict.NOT_TAKEN
        if first and reclaim is not None and refused.error is not None:
            verdict = reclaim.reclaim(spec, live_name, refused.error, notices)
        if verdict is Verdict.NOT_TAKEN:
            notices.extend(mine)
        if verdict is not Verdict.RECLAIMED:
            return None
    return None


class GitHubDoors:
    """Opens GitHub for a spec's entity with its configurator's App, where GARM reaches it.

    The URLs and CA bundle are those of GARM's endpoint (where GARM registered the scale set);
    the App is the one the spec's entity uses. GARM's endpoints are listed once, when first
    needed.
    """

    def __init__(self, client: GarmClient, state: DesiredState) -> None:
        """Take the pass's GARM client and desired state."""
        self._client = client
        self._state = state
        self._endpoints: dict[str, Endpoint] | None = None
        self._lock = threading.Lock()

    def open(self, spec: ScalesetSpec) -> ActionsClient | None:
        """The Actions service of ``spec``'s entity; None when its App or endpoint is unknown."""
        key = entity_key(spec.entity_type, spec.entity_name, spec.endpoint)
        entity = next((e for e in self._state.entities if e.key == key), None)
        if entity is None:
            return None
        credential = next(
            (c for c in self._state.credentials if c.name == entity.credentials_name), None
        )
        endpoint = self._endpoint(spec.endpoint)
        pem = credential.key.pem() if credential is not None else None
        if credential is None or endpoint is None or not pem:
            return None
        target = GitHubTarget(
            api_url=endpoint.api_base_url or "",
            base_url=endpoint.base_url or "",
            ca_bundle=stored_bundle(endpoint),
            app_id=credential.app_id,
            installation_id=credential.installation_id,
            private_key=pem,
            entity_type=spec.entity_type,
            entity_name=spec.entity_name,
        )
        return ActionsClient(target) if target.api_url and target.base_url else None

    def _endpoint(self, name: str) -> Endpoint | None:
        with self._lock:
            if self._endpoints is None:
                self._endpoints = {}
                with contain() as failed:
                    listed = self._client.list_endpoints()
                    self._endpoints = {(e.name or "").lower(): e for e in listed}
                if failed.error is not None:
                    logger.warning("GARM's endpoints could not be listed: %s", failed.error)
        return self._endpoints.get(name.lower())
