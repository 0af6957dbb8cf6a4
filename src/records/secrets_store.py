"""The charm's own Juju secrets: GARM's JWT secret, database passphrase and admin user.

The leader creates them once and never regenerates them: a new JWT secret would invalidate
every issued token, and a new passphrase would leave GARM unable to decrypt its database.
The login itself is ``reconcile.session``'s.
"""

from __future__ import annotations

import logging
import secrets
import string
from dataclasses import dataclass, field

import ops

logger = logging.getLogger(__name__)

GARM_SECRETS_LABEL = "garm-secrets"
ADMIN_CREDENTIALS_LABEL = "garm-admin-credentials"

ADMIN_USERNAME = "admin"
ADMIN_EMAIL = "admin@garm.local"
ADMIN_FULL_NAME = "GARM Admin"
ADMIN_PASSWORD_LENGTH = 20
PASSPHRASE_LENGTH = 32
# Symbols that need no quoting in JSON, TOML or a shell word.
PASSWORD_SYMBOLS = "-_.!@#%^*+="  # noqa: S105 - an alphabet, not a password

_GARM_SECRET_KEYS = ("jwt-secret", "db-passphrase")
_ADMIN_KEYS = ("username", "password", "email", "full-name")


@dataclass(frozen=True)
class AdminCredentials:
    """GARM's admin user."""

    username: str
    password: str = field(repr=False)
    email: str
    full_name: str

    @property
    def source(self) -> str:
        """The secret the credentials are kept in, for the security event of a refused login."""
        return ADMIN_CREDENTIALS_LABEL


@dataclass(frozen=True)
class OwnedSecrets:
    """Everything the workload needs from the owned secrets."""

    jwt_secret: str = field(repr=False)
    db_passphrase: str = field(repr=False)
    admin: AdminCredentials


class SecretsUnavailableError(Exception):
    """The owned secrets do not exist yet or are incomplete."""


def generate_admin_password() -> str:
    """Return a random admin password with every character class GARM's strength check wants."""
    alphabet = string.ascii_letters + string.digits + PASSWORD_SYMBOLS
    classes = (string.ascii_lowercase, string.ascii_uppercase, string.digits, PASSWORD_SYMBOLS)
    while True:
        candidate = "".join(secrets.choice(alphabet) for _ in range(ADMIN_PASSWORD_LENGTH))
        if all(any(c in chars for c in candidate) for chars in classes):
            return candidate


def generate_passphrase() -> str:
    """Return a 32-character alphanumeric passphrase (GARM requires exactly 32)."""
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(PASSPHRASE_LENGTH))


def owned_secrets(app: ops.Application, model: ops.Model, *, create: bool) -> OwnedSecrets:
    """Read both owned secrets, one secret-get each; the leader (``create``) makes a missing one.

    Raises:
        SecretsUnavailableError: a secret is missing (not the leader), unreadable or lacks a
            key.
    """
    creator = app if create else None
    garm = _read(model, GARM_SECRETS_LABEL, _GARM_SECRET_KEYS, creator)
    admin = _read(model, ADMIN_CREDENTIALS_LABEL, _ADMIN_KEYS, creator)
    return OwnedSecrets(
        jwt_secret=garm["jwt-secret"], db_passphrase=garm["db-passphrase"], admin=_admin(admin)
    )


def _new_content(label: str) -> tuple[dict[str, str], str]:
    if label == GARM_SECRETS_LABEL:
        content = {"jwt-secret": secrets.token_hex(32), "db-passphrase": generate_passphrase()}
        return content, "GARM JWT secret and database passphrase"
    admin = {
        "username": ADMIN_USERNAME,
        "password": generate_admin_password(),
        "email": ADMIN_EMAIL,
        "full-name": ADMIN_FULL_NAME,
    }
    return admin, "GARM admin user"


def read_admin_credentials(model: ops.Model) -> AdminCredentials:
    """Read the admin user.

    Raises:
        SecretsUnavailableError: the secret is missing, unreadable or lacks a key.
    """
    return _admin(_read(model, ADMIN_CREDENTIALS_LABEL, _ADMIN_KEYS))


def _admin(content: dict[str, str]) -> AdminCredentials:
    return AdminCredentials(
        username=content["username"],
        password=content["password"],
        email=content["email"],
        full_name=content["full-name"],
    )


def _read(
    model: ops.Model, label: str, keys: tuple[str, ...], creator: ops.Application | None = None
) -> dict[str, str]:
    """One secret-get (ops reads the content with the secret); ``creator`` makes a missing one."""
    try:
        content = model.get_secret(label=label).get_content()
    except ops.SecretNotFoundError as exc:
        if creator is None:
            raise SecretsUnavailableError(f"secret {label} is not available") from exc
        content, description = _new_content(label)
        creator.add_secret(content, label=label, description=description)
        logger.info("Created secret %s", label)
    except ops.ModelError as exc:
        raise SecretsUnavailableError(f"secret {label} is not available") from exc
    missing = [key for key in keys if not content.get(key)]
    if missing:
        # Key names only: the values are the secrets.
        logger.error("Secret %s lacks key(s): %s", label, ", ".join(missing))
        raise SecretsUnavailableError(f"secret {label} is incomplete")
    return content
