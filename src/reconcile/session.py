"""The one way into GARM as its admin: wait for it to answer, create the admin, log in.

Every caller that reaches GARM (the reconcile pass, the ``scaleset-status`` action, the removal
teardown) opens its client here (:func:`admin_session`), so GARM's bootstrap is written once:
readiness, first-run on a fresh GARM (only where the caller creates the admin), and the login,
whose refusal is the security event ``authn_login_fail``. The only module that calls GARM's
first-run or login. Knows GARM through the client; must not import ops.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from garm import GarmClient, GarmConnectionError, GarmUnauthorizedError
from vocabulary.security_events import admin_login_refused

logger = logging.getLogger(__name__)


class Admin(Protocol):
    """GARM's admin user as the charm holds it."""

    @property
    def username(self) -> str:
        """The admin's user name."""
        ...

    @property
    def password(self) -> str:
        """The admin's password."""
        ...

    @property
    def email(self) -> str:
        """The admin's e-mail address (first-run only)."""
        ...

    @property
    def full_name(self) -> str:
        """The admin's full name (first-run only)."""
        ...

    @property
    def source(self) -> str:
        """Where the credentials are kept (a secret's label), for the security event."""
        ...


class GarmNotAnsweringError(Exception):
    """GARM did not answer within the ready timeout."""


class GarmNotInitialisedError(Exception):
    """GARM has no admin user yet, and this caller does not create one."""


class AdminRefusedError(GarmUnauthorizedError):
    """GARM refused the admin's login (logged as ``authn_login_fail``)."""


@contextmanager
def admin_session(
    api_url: str,
    admin: Admin,
    *,
    ready_timeout: float | None = None,
    create_admin: bool = False,
) -> Iterator[GarmClient]:
    """A client logged in to GARM as the admin, closed on exit.

    Args:
        api_url: GARM's API base URL.
        admin: the admin user.
        ready_timeout: wait up to this many seconds for GARM to answer; None asks at once.
        create_admin: run first-run on a GARM that has no admin (the reconcile pass only).

    Raises:
        GarmNotAnsweringError: GARM did not answer within ``ready_timeout``.
        GarmNotInitialisedError: GARM has no admin, and ``create_admin`` is false.
        AdminRefusedError: GARM refused the login.
        GarmApiError: GARM failed otherwise.
    """
    with GarmClient(api_url) as client:
        if ready_timeout is not None:
            _bootstrap(client, admin, ready_timeout, create_admin=create_admin)
        try:
            client.login(admin.username, admin.password)
        except GarmUnauthorizedError as exc:
            admin_login_refused(admin.username, admin.source)
            raise AdminRefusedError(str(exc), status=exc.status) from exc
        yield client


def _bootstrap(
    client: GarmClient, admin: Admin, ready_timeout: float, *, create_admin: bool
) -> None:
    try:
        initialised = client.wait_for_ready(timeout=ready_timeout)
    except GarmConnectionError as exc:
        logger.warning("GARM did not answer within %.0f s", ready_timeout)
        raise GarmNotAnsweringError from exc
    if initialised:
        return
    if not create_admin:
        raise GarmNotInitialisedError
    logger.info("GARM is not initialised: running first-run setup")
    client.first_run(admin.username, admin.password, admin.email, admin.full_name)
    logger.info("GARM first-run done; admin user %s created", admin.username)
