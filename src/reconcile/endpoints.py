"""Keep GARM's GitHub Enterprise Server endpoints equal to what the configurators publish.

One endpoint per distinct server, named as ``github_endpoint.endpoint_name`` derives it and
described with the charm's marker (:data:`MANAGED_CREDENTIAL_DESCRIPTION`), which is what makes
it the charm's: an endpoint of that name without the marker is used as it is and never
changed or deleted. github.com's built-in endpoint is never touched here. ADR 0014.

Endpoints come first in a pass, because a credential names its endpoint, and go last, after
the credentials: GARM refuses to delete an endpoint that credentials or entities use, so one is
deleted only when no credential GARM still lists is on it. A changed CA bundle is an update,
compared as the certificates it holds (GARM re-encodes what it stores); a bundle that is gone
from the configurator stays in GARM, which has no way to clear one. Must not import ops.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Collection, Sequence

from garm import (
    CreateEndpointParams,
    Endpoint,
    EndpointRef,
    GarmClient,
    UpdateEndpointParams,
    describe_failure,
    to_base64,
)
from reconcile.containment import contain
from vocabulary.desired_state import (
    DEFAULT_GITHUB_ENDPOINT,
    MANAGED_CREDENTIAL_DESCRIPTION,
    EndpointSpec,
)
from vocabulary.github_endpoint import BASE_URL_FIELD, ca_certificates
from vocabulary.notices import Notice, Severity
from vocabulary.security_events import deleted

logger = logging.getLogger(__name__)

# Words of the status when an endpoint's name is held by one the charm did not create.
NAME_TAKEN = "endpoint {name} is not the charm's and points elsewhere"


def endpoint_of(ref: EndpointRef | None) -> str:
    """The endpoint name an object of GARM's is on, github.com when GARM names none."""
    return (ref.name if ref is not None and ref.name else DEFAULT_GITHUB_ENDPOINT).lower()


def stored_bundle(endpoint: Endpoint) -> str:
    """The PEM bundle GARM holds for an endpoint (``""`` when it has none)."""
    try:
        raw = base64.b64decode(endpoint.ca_cert_bundle or "", validate=True)
    except (binascii.Error, ValueError):
        return ""
    return raw.decode("ascii", "replace")


def stored_certificates(endpoint: Endpoint) -> tuple[bytes, ...]:
    """The certificates of the bundle GARM holds for an endpoint (none when it has none)."""
    return ca_certificates(stored_bundle(endpoint))


def is_managed(endpoint: Endpoint) -> bool:
    """Tell whether an endpoint carries the charm's ownership marker."""
    return endpoint.description == MANAGED_CREDENTIAL_DESCRIPTION


class EndpointReconciler:
    """Create, update and delete the GHES endpoints the charm owns.

    GARM's endpoints are listed once, when the reconciler is made.

    Attributes:
        missing: names of desired endpoints GARM does not hold (or that are not usable) after
            :meth:`ensure`: their credentials wait.
        notices: endpoints held back this pass, for the status.
    """

    def __init__(self, client: GarmClient) -> None:
        """List GARM's endpoints.

        Raises:
            GarmApiError: the listing failed.
        """
        self.client = client
        self.listed: dict[str, Endpoint] = {
            e.name.lower(): e for e in client.list_endpoints() if e.name
        }
        self.missing: set[str] = set()
        self.notices: list[Notice] = []
        self._deleted: set[str] = set()

    def ensure(self, desired: Sequence[EndpointSpec]) -> None:
        """Create the endpoints GARM lacks and send a changed CA bundle.

        A refused create or update is logged and noted; the other endpoints go on.
        """
        for spec in desired:
            current = self.listed.get(spec.name.lower())
            subject = spec.source or spec.name
            with contain(self.notices, subject, f"endpoint {spec.name}") as refused:
                if current is None:
                    self._create(spec)
                elif not is_managed(current):
                    self._foreign(spec, current)
                else:
                    self._update_bundle(spec, current)
            if refused.error is not None:
                logger.warning(
                    "GARM refused GitHub endpoint %s of %s; check %s: %s",
                    spec.name,
                    subject,
                    BASE_URL_FIELD,
                    refused.error,
                )
                if current is None:
                    self.missing.add(spec.name)

    def _create(self, spec: EndpointSpec) -> None:
        base_url, api_url, upload_url = spec.urls
        params = CreateEndpointParams(
            name=spec.name,
            description=MANAGED_CREDENTIAL_DESCRIPTION,
            base_url=base_url,
            api_base_url=api_url,
            upload_base_url=upload_url,
            ca_cert_bundle=to_base64(spec.ca_bundle) if spec.ca_bundle else None,
        )
        self.client.create_endpoint(params)
        logger.info("Created GitHub endpoint %s for %s", spec.name, spec.source)

    def _foreign(self, spec: EndpointSpec, current: Endpoint) -> None:
        if (current.base_url or "").rstrip("/") == spec.urls[0]:
            logger.info("Using GitHub endpoint %s as it is (not the charm's)", spec.name)
            return
        logger.warning(
            "GitHub endpoint %s is not the charm's and points elsewhere; leaving it", spec.name
        )
        self.missing.add(spec.name)
        self.notices.append(
            Notice(Severity.BLOCKED, spec.source or spec.name, NAME_TAKEN.format(name=spec.name))
        )

    def _update_bundle(self, spec: EndpointSpec, current: Endpoint) -> None:
        stored = stored_certificates(current)
        if spec.certificates == stored:
            return
        if not spec.certificates:
            logger.warning(
                "GitHub endpoint %s keeps its CA bundle: GARM cannot clear one", spec.name
            )
            return
        params = UpdateEndpointParams(ca_cert_bundle=to_base64(spec.ca_bundle))
        self.client.update_endpoint(spec.name, params)
        logger.info("Updated the CA bundle of GitHub endpoint %s", spec.name)

    def prune(self, desired: Sequence[EndpointSpec], in_use: Collection[str]) -> None:
        """Delete the charm's endpoints nobody desires and no credential in GARM is on.

        Args:
            desired: the endpoints the configurators publish.
            in_use: names of the endpoints the credentials left in GARM are on.

        Raises:
            GarmConnectionError: GARM became unreachable (no further delete is tried).
        """
        wanted = {spec.name.lower() for spec in desired}
        used = {name.lower() for name in in_use}
        for key, current in self.listed.items():
            if key in wanted or key == DEFAULT_GITHUB_ENDPOINT or not is_managed(current):
                continue
            if key in used:
                logger.info("Keeping GitHub endpoint %s while credentials use it", current.name)
                continue
            logger.info("Deleting GitHub endpoint %s: no longer desired", current.name)
            with contain() as refused:
                self.client.delete_endpoint(current.name or key)
            if refused.error is not None:
                logger.warning(
                    "Cannot delete GitHub endpoint %s: %s; will retry",
                    current.name,
                    describe_failure(refused.error),
                )
                continue
            self._deleted.add(key)
            deleted("github-endpoints", current.name or key, current.name or key)

    def held_bundles(self) -> dict[str, str]:
        """The CA bundles of the charm's endpoints GARM still holds, by lower-case name.

        As GARM listed them when the pass began, less those the pass deleted; an endpoint
        without a bundle is left out. What a configurator publishes now is the caller's.
        """
        bundles = {
            key: stored_bundle(current)
            for key, current in self.listed.items()
            if is_managed(current) and key not in self._deleted
        }
        return {key: bundle for key, bundle in sorted(bundles.items()) if ca_certificates(bundle)}
